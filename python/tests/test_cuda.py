"""CUDA: the same calls on device tensors, on the current stream, agree with the CPU."""

import pytest
import torch

import fsattn
from fsattn.nn import BLA, IDA, prefill_then_decode
from fsattn_reference import grads, ida_init, leaf32, loss_of, randn, rel_err

from conftest import requires_cuda
from tiny_model import TinyModel, train_previous_token

pytestmark = requires_cuda

FWD_TOL = 1e-5
GRAD_TOL = 1e-4


def run_grads(fn, leaves, d_o, d_state):
    o, st = fn(*leaves)
    return (o, st), grads(loss_of(o, st, d_o, d_state), leaves)


@pytest.mark.parametrize("varlen", [False, True])
def test_bla_cuda_matches_cpu(varlen):
    g = torch.Generator().manual_seed(0)
    B, T, H, Dk, Dv, S = (1 if varlen else 2), 70, 3, 16, 8, 12
    cu = [0, 30, 30, 70] if varlen else None
    N = 3 if varlen else B
    xs = [randn((B, T, H, Dk), g), randn((B, T, H, Dk), g), randn((B, T, H, Dv), g), torch.log(torch.tensor([0.9, 0.95, 0.99])),
          randn((N, H, S, Dk), g, 0.3), randn((N, H, S, Dv), g, 0.3)]
    d_o, d_st = randn((B, T, H, Dv), g), (randn((N, H, S, Dk), g), randn((N, H, S, Dv), g))

    def run(device):
        cu_dev = None if cu is None else torch.tensor(cu, device=device, dtype=torch.int32)

        def fn(q, k, v, lg, sk, sv):
            return fsattn.bla(q, k, v, lg, modes=5, period=20.0, slots=S, pos0=7, initial_state=(sk, sv),
                              output_final_state=True, cu_seqlens=cu_dev)

        leaves = [leaf32(x.to(device)) for x in xs]
        return run_grads(fn, leaves, d_o.to(device), tuple(x.to(device) for x in d_st))

    (o_c, st_c), g_c = run("cpu")
    (o_g, st_g), g_g = run("cuda")
    assert o_g.is_cuda and st_g[0].is_cuda
    assert rel_err(o_g, o_c) <= FWD_TOL and rel_err(st_g[0], st_c[0]) <= FWD_TOL
    for a, b in zip(g_g, g_c):
        assert a.is_cuda and rel_err(a, b) <= GRAD_TOL


def test_ida_cuda_matches_cpu():
    g = torch.Generator().manual_seed(1)
    B, T, H, Dk, Dv, M = 2, 50, 2, 16, 8, 6
    xs = [randn((B, T, H, Dk), g), randn((B, T, H, Dk), g), randn((B, T, H, Dv), g)] + ida_init(H, Dk, Dv, M, g)
    xs += [randn((B, H, M, Dk, 2), g, 0.3), randn((B, H, M, Dv, 2), g, 0.3)]
    d_o, d_st = randn((B, T, H, Dv), g), (randn((B, H, M, Dk, 2), g), randn((B, H, M, Dv, 2), g))

    def fn(*ls):
        return fsattn.ida(*ls[:3], fsattn.IdaParams(*ls[3:12]), initial_state=tuple(ls[12:]), output_final_state=True)

    (o_c, _), g_c = run_grads(fn, [leaf32(x) for x in xs], d_o, d_st)
    (o_g, _), g_g = run_grads(fn, [leaf32(x.cuda()) for x in xs], d_o.cuda(), tuple(x.cuda() for x in d_st))
    assert rel_err(o_g, o_c) <= FWD_TOL
    for a, b in zip(g_g, g_c):
        assert rel_err(a, b) <= GRAD_TOL


def test_runs_on_the_current_stream():
    g = torch.Generator().manual_seed(2)
    q, k, v = (randn((4, 300, 4, 32), g).cuda() for _ in range(3))
    lg = torch.full((4,), -0.01, device="cuda")
    want, _ = fsattn.bla(q, k, v, lg, modes=15, period=64.0, slots=32)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got, _ = fsattn.bla(q, k, v, lg, modes=15, period=64.0, slots=32)
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(got, want)


@pytest.mark.parametrize("kind", ["bla", "ida"])
def test_layers_prefill_then_decode_cuda(kind):
    torch.manual_seed(0)
    layer = (BLA(32, 2, 16, slots=16, period=32.0) if kind == "bla" else IDA(32, 2, 16, modes=8)).cuda()
    x = torch.randn(3, 40, 32, device="cuda")
    with torch.no_grad():
        y, _ = layer(x)
    y2, _ = prefill_then_decode(layer, x, 25)
    assert rel_err(y2, y) <= FWD_TOL


def test_interpolate_of_a_cuda_state():
    st = torch.randn(1, 2, 7, 3)
    want = fsattn.bla_interpolate(st, [0.0, 1.5], modes=3, period=7.0, position=9)
    got = fsattn.bla_interpolate(st.cuda(), [0.0, 1.5], modes=3, period=7.0, position=9)
    assert got.is_cuda and torch.equal(got.cpu(), want)


def test_other_device_index():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    g = torch.Generator().manual_seed(3)
    q, k, v = (randn((1, 20, 2, 8), g) for _ in range(3))
    lg = torch.tensor([-0.1, -0.2])
    want, _ = fsattn.bla(q, k, v, lg, modes=3, period=10.0, slots=7)
    got, _ = fsattn.bla(*(x.to("cuda:1") for x in (q, k, v, lg)), modes=3, period=10.0, slots=7)
    assert got.device == torch.device("cuda:1") and rel_err(got, want) <= FWD_TOL


@pytest.mark.parametrize("kind", ["bla", "ida"])
def test_steps_in_a_cuda_graph(kind):
    """Eight decode steps captured in one CUDA graph, replayed, give the eager steps' outputs
    and states (the steps allocate nothing and read nothing back on the host)."""
    g = torch.Generator().manual_seed(4)
    B, H, D, F, N = 2, 3, 16, 8, 8
    q, k, v = (randn((N, B, 1, H, D), g).cuda() for _ in range(3))
    if kind == "bla":
        lg = torch.log(torch.tensor([0.9, 0.95, 0.99])).cuda()
        shape = (B, H, F, D)

        def step(i, st):
            return fsattn.bla_step(q[i], k[i], v[i], lg, st, pos=5 + i, modes=3, period=8.0)
    else:
        params = fsattn.IdaParams(*(x.cuda() for x in ida_init(H, D, D, F, g)))
        shape = (B, H, F, D, 2)

        def step(i, st):
            return fsattn.ida_step(q[i], k[i], v[i], params, st)

    def run(st):
        return torch.stack([step(i, st)[0] for i in range(N)])

    eager_state = (torch.zeros(shape, device="cuda"), torch.zeros(shape, device="cuda"))
    want = run(eager_state)
    state = (torch.zeros(shape, device="cuda"), torch.zeros(shape, device="cuda"))
    side = torch.cuda.Stream()  # warm-up on a side stream, as PyTorch's graph capture asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run(state)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run(state)
    for x in state:
        x.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert rel_err(out, want) <= FWD_TOL
    for a, b in zip(state, eager_state):
        assert rel_err(a, b) <= FWD_TOL


def test_tiny_bla_model_trains_compiled():
    """A two-layer model with fsattn.nn.BLA trains under torch.compile(fullgraph=True) on the
    GPU: the task (predict the previous token) needs the mixer, and the loss falls."""
    if not fsattn.USES_CUSTOM_OPS:
        pytest.skip("needs torch.library.custom_op (PyTorch 2.4 or later) for torch.compile")
    torch.manual_seed(0)
    model = TinyModel(16, 64, 2, num_heads=4, head_dim=16, slots=16, period=16.0).cuda()
    compiled = torch.compile(model, fullgraph=True)
    losses = train_previous_token(model, compiled, steps=60, batch=16, seqlen=64, lr=1e-2, device="cuda")
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.5 * first, losses
