"""The layers: prefill then decode equals the whole sequence; state chaining; varlen; a tiny
model trains."""

import math

import pytest
import torch

from fsattn.nn import BLA, IDA, prefill_then_decode
from fsattn_reference import rel_err
from tiny_model import TinyModel, train_previous_token

TOL = 1e-5


def make_layer(kind, seed=0):
    torch.manual_seed(seed)
    if kind == "bla":
        return BLA(24, num_heads=3, head_dim=8, slots=9, period=12.0)
    return IDA(24, num_heads=3, head_dim=8, modes=6)


@pytest.mark.parametrize("kind", ["bla", "ida"])
@pytest.mark.parametrize("prefill", [0, 1, 7, 19])
def test_prefill_then_decode_equals_whole_sequence(kind, prefill):
    layer = make_layer(kind)
    x = torch.randn(2, 19, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y, st = layer(x)
    y2, st2 = prefill_then_decode(layer, x, prefill)
    assert y2.shape == y.shape
    assert rel_err(y2, y) <= TOL
    assert rel_err(st2.k, st.k) <= TOL and rel_err(st2.v, st.v) <= TOL
    if kind == "bla":
        assert st.pos == st2.pos == 19


@pytest.mark.parametrize("kind", ["bla", "ida"])
def test_layer_state_chaining(kind):
    layer = make_layer(kind)
    x = torch.randn(2, 16, 24, generator=torch.Generator().manual_seed(2))
    y, st = layer(x)
    ya, sa = layer(x[:, :5])
    yb, sb = layer(x[:, 5:], sa)
    assert rel_err(torch.cat([ya, yb], 1), y) <= TOL
    assert rel_err(sb.k, st.k) <= TOL


@pytest.mark.parametrize("kind", ["bla", "ida"])
def test_layer_varlen_then_steps(kind):
    layer = make_layer(kind)
    g = torch.Generator().manual_seed(3)
    seqs = [torch.randn(1, n, 24, generator=g) for n in (5, 8)]
    nxt = torch.randn(2, 24, generator=g)
    with torch.no_grad():
        y, st = layer(torch.cat(seqs, 1), cu_seqlens=torch.tensor([0, 5, 13]))
        if kind == "bla":
            assert st.pos == (5, 8)
        y_t, st2 = layer.step(nxt, st)  # BLA: sequences at different positions
        for i, s in enumerate(seqs):
            y_i, _ = layer(torch.cat([s, nxt[i:i + 1, None]], 1))
            assert rel_err(y[:, (0, 5)[i]:(5, 13)[i]], y_i[:, :-1]) <= TOL
            assert rel_err(y_t[i], y_i[0, -1]) <= TOL
    if kind == "bla":
        assert st2.pos == (6, 9)


def test_bla_layer_log_gamma_stays_negative():
    layer = BLA(8, num_heads=4, head_dim=4, slots=4)
    lg = layer.log_gamma
    assert lg.shape == (4,) and bool((lg < 0).all())
    assert layer.modes == 1
    gamma = lg.exp()
    assert torch.allclose(1 / (1 - gamma), torch.tensor([8.0, 32.0, 128.0, 512.0]), rtol=1e-3)


def test_ida_layer_reference_initialisation():
    torch.manual_seed(0)
    layer = IDA(16, num_heads=2, head_dim=8, modes=16)
    M = 16
    n = torch.arange(M, dtype=torch.float64)
    assert torch.allclose(layer.A_im[1].double(), (M / math.pi) * (M / (2 * n + 1) - 1), rtol=1e-6)
    assert torch.allclose(layer.A_re_log, torch.full((2, M), math.log(0.5)))
    assert bool((layer.log_dt >= math.log(1e-3)).all() and (layer.log_dt <= math.log(1e-1)).all())
    assert torch.equal(layer.B[..., 0], torch.ones(2, M)) and torch.equal(layer.B[..., 1], torch.zeros(2, M))
    assert torch.equal(layer.gk, torch.ones(2, 8)) and torch.equal(layer.bv, torch.zeros(2, 8))
    var = (layer.C.double() ** 2).sum(-1).mean().item()  # E|C|^2 = 1/M
    assert abs(var - 1 / M) < 0.3 / M


def test_tiny_bla_model_trains():
    torch.manual_seed(0)
    model = TinyModel(8, 32, 1, num_heads=2, head_dim=16, slots=8, period=8.0)
    losses = train_previous_token(model, model, steps=20, batch=8, seqlen=24, lr=3e-2)
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3, losses
