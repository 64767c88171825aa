"""Strided q, k, v (slices of a fused projection, head-major views) are read where they lie,
uncopied, and give bitwise what contiguous copies give, forward and backward."""

import pytest
import torch

import fsattn
from fsattn._common import _keeps_strides
from fsattn_reference import ida_init, randn

B, T, H, D = 2, 37, 3, 8


def fused_qkv(gen):
    """q, k, v as slices of one [B, T, 3, H, D] projection, a leaf that takes their gradients."""
    x = randn((B, T, 3, H, D), gen).requires_grad_()
    return x, x.unbind(2)


def head_major(gen):
    """q, k, v as [B, T, H, D] views of [B, H, T, D] tensors."""
    xs = [randn((B, H, T, D), gen).requires_grad_() for _ in range(3)]
    return xs, [x.transpose(1, 2) for x in xs]


def run_both(call, make):
    """call(q, k, v) on the strided views and on contiguous copies: outputs and the leaves'
    gradients, bitwise equal."""
    gen = torch.Generator().manual_seed(5)
    leaves, views = make(gen)
    assert all(_keeps_strides(x) and not x.is_contiguous() for x in views)
    leaves = leaves if isinstance(leaves, list) else [leaves]
    o = call(*views)
    o.square().sum().backward()
    got = [o.detach()] + [x.grad.clone() for x in leaves]
    for x in leaves:
        x.grad = None
    o = call(*[x.contiguous() for x in views])
    o.square().sum().backward()
    want = [o.detach()] + [x.grad.clone() for x in leaves]
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("make", [fused_qkv, head_major])
def test_bla_strided(make):
    log_gamma = torch.log(torch.full((H,), 0.9))
    run_both(lambda q, k, v: fsattn.bla(q, k, v, log_gamma, modes=3, period=11.5, slots=5)[0], make)


@pytest.mark.parametrize("make", [fused_qkv, head_major])
def test_ida_strided(make):
    gen = torch.Generator().manual_seed(6)
    params = fsattn.IdaParams(*ida_params(gen))
    run_both(lambda q, k, v: fsattn.ida(q, k, v, params)[0], make)


def test_varlen_strided():
    gen = torch.Generator().manual_seed(7)
    x = randn((1, T, 3, H, D), gen)
    q, k, v = x.unbind(2)
    cu = torch.tensor([0, 5, 5, T], dtype=torch.int64)
    log_gamma = torch.log(torch.full((H,), 0.8))
    kw = dict(modes=2, period=7.0, slots=4, cu_seqlens=cu, output_final_state=True)
    o, (sk, sv) = fsattn.bla(q, k, v, log_gamma, **kw)
    o2, (sk2, sv2) = fsattn.bla(q.contiguous(), k.contiguous(), v.contiguous(), log_gamma, **kw)
    assert torch.equal(o, o2) and torch.equal(sk, sk2) and torch.equal(sv, sv2)


def test_unusable_strides_are_copied():
    """A channel stride other than 1, or a broadcast (stride 0), is made contiguous first."""
    gen = torch.Generator().manual_seed(8)
    q = randn((B, T, H, D), gen)
    assert not _keeps_strides(q.transpose(2, 3).contiguous().transpose(2, 3))
    assert not _keeps_strides(randn((1, T, H, D), gen).expand(B, T, H, D))
    log_gamma = torch.log(torch.full((H,), 0.9))
    kw = dict(modes=3, period=11.5, slots=5)
    k = randn((1, T, H, D), gen).expand(B, T, H, D)
    o, _ = fsattn.bla(q, k, q, log_gamma, **kw)
    o2, _ = fsattn.bla(q, k.contiguous(), q, log_gamma, **kw)
    assert torch.equal(o, o2)


def ida_params(gen):
    return ida_init(H, D, D, 4, gen)
