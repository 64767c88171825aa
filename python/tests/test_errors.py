"""Bad arguments raise exceptions that name the argument (and never crash the process)."""

import pytest
import torch

import fsattn
from fsattn_reference import ida_init, randn

from conftest import requires_cuda

B, T, H, Dk, Dv, S, M = 2, 5, 2, 4, 3, 6, 2
HYPER = dict(modes=M, period=8.0, slots=S)


def bla_inputs():
    g = torch.Generator().manual_seed(0)
    return (randn((B, T, H, Dk), g), randn((B, T, H, Dk), g), randn((B, T, H, Dv), g), torch.log(torch.tensor([0.9, 0.8])))


def ida_inputs():
    g = torch.Generator().manual_seed(0)
    return (randn((B, T, H, Dk), g), randn((B, T, H, Dk), g), randn((B, T, H, Dv), g), fsattn.IdaParams(*ida_init(H, Dk, Dv, M, g)))


def test_library_loads():
    assert fsattn.library_version().startswith("1.")
    assert fsattn.variants("bla_forward", "cpu")
    assert isinstance(fsattn.tuning_info(), str)
    assert issubclass(fsattn.FsattnError, RuntimeError)
    assert issubclass(fsattn.UnsupportedError, fsattn.FsattnError)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_integer_activation(which):
    args = list(bla_inputs())
    args[which] = args[which].to(torch.int32)
    with pytest.raises(TypeError, match="qkv"[which]):
        fsattn.bla(*args, **HYPER)


def test_not_a_tensor():
    q, k, v, lg = bla_inputs()
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        fsattn.bla(q.tolist(), k, v, lg, **HYPER)


@pytest.mark.parametrize(
    "which,shape,name",
    [(1, (B, T, H, Dk + 1), "k"), (2, (B, T + 1, H, Dv), "v"), (3, (H + 1,), "log_gamma"), (0, (B, T, H), "q")],
)
def test_bla_wrong_shape(which, shape, name):
    args = list(bla_inputs())
    args[which] = torch.zeros(shape)
    with pytest.raises(ValueError, match=name):
        fsattn.bla(*args, **HYPER)


def test_bla_wrong_state_shape():
    q, k, v, lg = bla_inputs()
    with pytest.raises(ValueError, match=r"initial_state\[1\]"):
        fsattn.bla(q, k, v, lg, initial_state=(torch.zeros(B, H, S, Dk), torch.zeros(B, H, S, Dv + 1)), **HYPER)
    with pytest.raises(TypeError, match="initial_state"):
        fsattn.bla(q, k, v, lg, initial_state=torch.zeros(B, H, S, Dk), **HYPER)


def test_bla_bad_values_raise_library_errors():
    q, k, v, lg = bla_inputs()
    with pytest.raises(ValueError, match="log_gamma"):
        fsattn.bla(q, k, v, torch.tensor([0.5, -0.1]), **HYPER)
    with pytest.raises(ValueError, match="modes"):
        fsattn.bla(q, k, v, lg, modes=300, period=8.0, slots=S)
    with pytest.raises(ValueError, match="slots"):
        fsattn.bla(q, k, v, lg, modes=2, period=8.0, slots=0)
    with pytest.raises(ValueError, match="period"):
        fsattn.bla(q, k, v, lg, modes=2, period=float("nan"), slots=S)
    with pytest.raises(ValueError, match="pos0"):
        fsattn.bla(q, k, v, lg, pos0=-1, **HYPER)
    with pytest.raises(ValueError, match="scale"):
        fsattn.bla(q, k, v, lg, scale=-1.0, **HYPER)
    # too large a head dimension
    big = torch.zeros(1, 1, 1, 300)
    with pytest.raises(ValueError, match="dk"):
        fsattn.bla(big, big, torch.zeros(1, 1, 1, 2), torch.zeros(1), **HYPER)


def test_cu_seqlens_errors():
    q, k, v, lg = bla_inputs()
    with pytest.raises(ValueError, match="batch must be 1"):
        fsattn.bla(q, k, v, lg, cu_seqlens=[0, T], **HYPER)
    q1, k1, v1 = q[:1], k[:1], v[:1]
    with pytest.raises(TypeError, match="cu_seqlens"):
        fsattn.bla(q1, k1, v1, lg, cu_seqlens=torch.tensor([0.0, 5.0]), **HYPER)
    with pytest.raises(ValueError, match="cu_seqlens"):
        fsattn.bla(q1, k1, v1, lg, cu_seqlens=torch.tensor([0]), **HYPER)
    with pytest.raises(ValueError, match="cu_seqlens"):  # the last offset must be T (library check)
        fsattn.bla(q1, k1, v1, lg, cu_seqlens=[0, 2, T + 1], **HYPER)
    with pytest.raises(ValueError, match="cu_seqlens"):  # decreasing
        fsattn.bla(q1, k1, v1, lg, cu_seqlens=[0, 3, 2, T], **HYPER)
    with pytest.raises(ValueError, match=r"initial_state\[0\]"):  # states are per sequence
        fsattn.bla(q1, k1, v1, lg, cu_seqlens=[0, 2, T], initial_state=(torch.zeros(1, H, S, Dk), torch.zeros(1, H, S, Dv)), **HYPER)


def test_unsupported_device():
    q, k, v, lg = (x.to("meta") for x in bla_inputs())
    with pytest.raises(ValueError, match="meta"):
        fsattn.bla(q, k, v, lg, **HYPER)


def test_ida_errors():
    q, k, v, p = ida_inputs()
    with pytest.raises(TypeError, match="params"):
        fsattn.ida(q, k, v, list(p))
    with pytest.raises(ValueError, match=r"params\.C"):
        fsattn.ida(q, k, v, p._replace(C=torch.zeros(H, M, M)))
    with pytest.raises(ValueError, match=r"params\.gv"):
        fsattn.ida(q, k, v, p._replace(gv=torch.zeros(H, Dk + 1)))
    with pytest.raises(TypeError, match=r"params\.log_dt"):
        fsattn.ida(q, k, v, p._replace(log_dt=torch.zeros(H, dtype=torch.int64)))
    with pytest.raises(ValueError, match="eps"):
        fsattn.ida(q, k, v, p, eps=-1.0)
    with pytest.raises(ValueError, match=r"initial_state\[0\]"):
        fsattn.ida(q, k, v, p, initial_state=(torch.zeros(B, H, M, Dk), torch.zeros(B, H, M, Dv, 2)))
    with pytest.raises(ValueError, match="modes"):  # M = 0 (library check)
        fsattn.ida(q, k, v, p._replace(A_re_log=torch.zeros(H, 0), A_im=torch.zeros(H, 0), B=torch.zeros(H, 0, 2), C=torch.zeros(H, 0, 0, 2)))


def test_step_errors():
    q, k, v, lg = bla_inputs()
    st = (torch.zeros(B, H, S, Dk), torch.zeros(B, H, S, Dv))
    with pytest.raises(ValueError, match="one token"):
        fsattn.bla_step(q, k, v, lg, st, pos=0, modes=M, period=8.0)
    q1, k1, v1 = q[:, :1], k[:, :1], v[:, :1]
    with pytest.raises(TypeError, match="state"):
        fsattn.bla_step(q1, k1, v1, lg, None, pos=0, modes=M, period=8.0)
    with pytest.raises(ValueError, match=r"state\[1\]"):
        fsattn.bla_step(q1, k1, v1, lg, (st[0], torch.zeros(B, H, S + 1, Dv)), pos=0, modes=M, period=8.0)
    with pytest.raises(ValueError, match="pos0"):  # negative position (library check)
        fsattn.bla_step(q1, k1, v1, lg, st, pos=-3, modes=M, period=8.0)
    qi, ki, vi, p = ida_inputs()
    sti = (torch.zeros(B, H, M, Dk, 2), torch.zeros(B, H, M, Dv, 2))
    with pytest.raises(ValueError, match=r"state\[0\]"):
        fsattn.ida_step(qi[:, :1], ki[:, :1], vi[:, :1], p, (torch.zeros(B, H, M, Dk), sti[1]))


def test_interpolate_errors():
    st = torch.zeros(1, 2, 5, 3)
    with pytest.raises(ValueError, match="lags"):
        fsattn.bla_interpolate(st, [], modes=2, period=5.0, position=0)
    with pytest.raises(ValueError, match="lag"):  # non-finite lag (library check)
        fsattn.bla_interpolate(st, [float("inf")], modes=2, period=5.0, position=0)
    with pytest.raises(ValueError, match="state"):
        fsattn.bla_interpolate(torch.zeros(2, 5, 3), [0.0], modes=2, period=5.0, position=0)


def test_unknown_variant():
    q, k, v, lg = bla_inputs()
    fsattn.set_variant("bla_forward", "no_such_variant")
    try:
        with pytest.raises(ValueError, match="variant"):
            fsattn.bla(q, k, v, lg, **HYPER)
    finally:
        fsattn.set_variant("bla_forward", None)
    with pytest.raises(ValueError, match="unknown op"):
        fsattn.set_variant("bla_sideways", "x")


@requires_cuda
def test_mixed_devices():
    q, k, v, lg = bla_inputs()
    with pytest.raises(ValueError, match="k is on cpu"):
        fsattn.bla(q.cuda(), k, v.cuda(), lg.cuda(), **HYPER)
    with pytest.raises(ValueError, match="log_gamma"):
        fsattn.bla(q.cuda(), k.cuda(), v.cuda(), lg, **HYPER)
