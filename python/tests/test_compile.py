"""torch >= 2.4: the custom ops (schemas, fake implementations, autograd registration) and
torch.compile(fullgraph=True) of the mixers, forward and backward, and of the decode steps."""

import pytest
import torch

import fsattn
from fsattn_reference import ida_init, randn, rel_err

from conftest import HAS_CUDA, requires_torch24

pytestmark = [
    requires_torch24,
    pytest.mark.skipif(not fsattn.USES_CUSTOM_OPS, reason="custom ops disabled (FSATTN_DISABLE_CUSTOM_OPS)"),
]

DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])


def bla_args(device, g, B=2, T=9, H=2, Dk=4, Dv=3, S=5):
    q, k, v = randn((B, T, H, Dk), g), randn((B, T, H, Dk), g), randn((B, T, H, Dv), g)
    lg = torch.log(torch.tensor([0.9, 0.8]))
    s0 = (randn((B, H, S, Dk), g, 0.3), randn((B, H, S, Dv), g, 0.3))
    return [x.to(device) for x in (q, k, v, lg)], tuple(x.to(device) for x in s0)


def test_custom_ops_are_used():
    assert fsattn.USES_CUSTOM_OPS
    for name in ("bla_fwd", "bla_bwd", "ida_fwd", "ida_bwd", "bla_step", "ida_step"):
        assert hasattr(torch.ops.fsattn, name)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    g = torch.Generator().manual_seed(0)
    (q, k, v, lg), (sk, sv) = bla_args(device, g)
    q, k, v, lg, sk, sv = (x.requires_grad_(True) for x in (q, k, v, lg, sk, sv))
    opcheck = torch.library.opcheck
    opcheck(torch.ops.fsattn.bla_fwd.default, (q, k, v, lg, sk, sv, None, 2, 7.5, 5, 0.0, 3, True))
    opcheck(torch.ops.fsattn.bla_fwd.default, (q, k, v, lg, None, None, None, 2, 7.5, 5, 0.0, 0, False))
    cu = torch.tensor([0, 4, 9])
    opcheck(torch.ops.fsattn.bla_fwd.default, (q[:1], k[:1], v[:1], lg, sk, sv, cu, 2, 7.5, 5, 0.0, 0, True))
    H, Dk, Dv, M = 2, 4, 3, 3
    p = [x.to(device).requires_grad_(True) for x in ida_init(H, Dk, Dv, M, g)]
    s0 = [randn((2, H, M, Dk, 2), g, 0.3).to(device), randn((2, H, M, Dv, 2), g, 0.3).to(device)]
    opcheck(torch.ops.fsattn.ida_fwd.default, (q, k, v, *p, *s0, None, 0.0, True))
    q1, k1, v1 = (x[:, :1].detach().contiguous() for x in (q, k, v))
    opcheck(torch.ops.fsattn.bla_step.default, (q1, k1, v1, lg.detach(), sk.detach().clone(), sv.detach().clone(), 2, 7.5, 0.0, 4))
    opcheck(torch.ops.fsattn.ida_step.default, (q1, k1, v1, *[x.detach() for x in p], s0[0].clone(), s0[1].clone(), 0.0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("varlen", [False, True])
def test_compile_fullgraph_forward_backward(device, varlen):
    g = torch.Generator().manual_seed(1)
    (q, k, v, lg), s0 = bla_args(device, g)
    cu = None
    if varlen:
        q, k, v = q[:1], k[:1], v[:1]
        cu = torch.tensor([0, 4, 9], device=device)

    def f(q, k, v, lg, sk, sv):
        o, st = fsattn.bla(q, k, v, lg, modes=2, period=7.5, slots=5, pos0=3, initial_state=(sk, sv),
                           output_final_state=True, cu_seqlens=cu)
        return (o * o).sum() + st[0].sum() + (st[1] ** 2).sum()

    leaves_e = [x.clone().requires_grad_(True) for x in (q, k, v, lg, *s0)]
    leaves_c = [x.clone().requires_grad_(True) for x in (q, k, v, lg, *s0)]
    le = f(*leaves_e)
    ge = torch.autograd.grad(le, leaves_e)
    fc = torch.compile(f, fullgraph=True, backend="aot_eager" if device == "cpu" else "inductor")
    lc = fc(*leaves_c)
    gc = torch.autograd.grad(lc, leaves_c)
    assert rel_err(lc, le) <= 1e-6
    for a, b in zip(gc, ge):
        assert rel_err(a, b) <= 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_ida(device):
    g = torch.Generator().manual_seed(2)
    (q, k, v, _), _ = bla_args(device, g)
    p = fsattn.IdaParams(*[x.to(device) for x in ida_init(2, 4, 3, 3, g)])

    def f(q, k, v, *params):
        o, st = fsattn.ida(q, k, v, fsattn.IdaParams(*params), output_final_state=True)
        return (o * o).sum() + st[1].sum()

    le = [x.clone().requires_grad_(True) for x in (q, k, v, *p)]
    lc = [x.clone().requires_grad_(True) for x in (q, k, v, *p)]
    ge = torch.autograd.grad(f(*le), le)
    fc = torch.compile(f, fullgraph=True, backend="aot_eager" if device == "cpu" else "inductor")
    gc = torch.autograd.grad(fc(*lc), lc)
    for a, b in zip(gc, ge):
        assert rel_err(a, b) <= 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_steps(device):
    g = torch.Generator().manual_seed(3)
    (q, k, v, lg), (sk, sv) = bla_args(device, g, T=1)

    def step(q, k, v, lg, sk, sv, pos: int):
        o, _ = fsattn.bla_step(q, k, v, lg, (sk, sv), pos=pos, modes=2, period=7.5)
        return o

    ske, sve = sk.clone(), sv.clone()
    skc, svc = sk.clone(), sv.clone()
    sc = torch.compile(step, fullgraph=True, backend="aot_eager" if device == "cpu" else "inductor")
    for pos in range(3):
        oe = step(q, k, v, lg, ske, sve, pos)
        oc = sc(q, k, v, lg, skc, svc, pos)
        assert rel_err(oc, oe) <= 1e-6
    assert rel_err(skc, ske) <= 1e-6 and rel_err(svc, sve) <= 1e-6
