"""Checks of the float64 references themselves: their gradients against central finite
differences (torch.autograd.gradcheck), and BLA's exact-window property (docs/spec.md §2)."""


import torch

from fsattn_reference import bla_reference, ida_init, ida_reference

f64 = torch.float64


def test_bla_reference_gradcheck():
    g = torch.Generator().manual_seed(0)
    B, T, H, Dk, Dv, S, M, W = 1, 4, 2, 3, 2, 5, 2, 6.5
    q, k = (torch.randn(B, T, H, Dk, generator=g, dtype=f64, requires_grad=True) for _ in range(2))
    v = torch.randn(B, T, H, Dv, generator=g, dtype=f64, requires_grad=True)
    lg = torch.log(torch.tensor([0.8, 0.95], dtype=f64)).requires_grad_(True)
    sk = torch.randn(B, H, S, Dk, generator=g, dtype=f64, requires_grad=True)
    sv = torch.randn(B, H, S, Dv, generator=g, dtype=f64, requires_grad=True)

    def f(q, k, v, lg, sk, sv):
        o, (a, b) = bla_reference(q, k, v, lg, modes=M, period=W, slots=S, pos0=3, initial_state=(sk, sv))
        return o, a, b

    assert torch.autograd.gradcheck(f, (q, k, v, lg, sk, sv), eps=1e-6, atol=1e-7, rtol=1e-6)


def test_ida_reference_gradcheck():
    g = torch.Generator().manual_seed(0)
    B, T, H, Dk, Dv, M = 1, 3, 2, 3, 2, 2
    q, k = (torch.randn(B, T, H, Dk, generator=g, dtype=f64, requires_grad=True) for _ in range(2))
    v = torch.randn(B, T, H, Dv, generator=g, dtype=f64, requires_grad=True)
    params = [p.double().requires_grad_(True) for p in ida_init(H, Dk, Dv, M, g)]
    sk = (0.3 * torch.randn(B, H, M, Dk, 2, generator=g, dtype=f64)).requires_grad_(True)
    sv = (0.3 * torch.randn(B, H, M, Dv, 2, generator=g, dtype=f64)).requires_grad_(True)

    def f(q, k, v, sk, sv, *p):
        o, (a, b) = ida_reference(q, k, v, p, initial_state=(sk, sv))
        return o, a, b

    assert torch.autograd.gradcheck(f, (q, k, v, sk, sv, *params), eps=1e-6, atol=1e-7, rtol=1e-6)


def test_bla_reference_exact_window():
    # W = S = 2M+1, γ = 1, T <= W: causal softmax attention over the t+1 tokens plus S-t-1
    # empty slots (key and value 0, each adding exp(0) to the denominator).
    g = torch.Generator().manual_seed(0)
    M = 3
    S = 2 * M + 1
    B, T, H, D = 1, S, 1, 4
    q, k, v = (torch.randn(B, T, H, D, generator=g, dtype=f64) for _ in range(3))
    o, _ = bla_reference(q, k, v, torch.zeros(H, dtype=f64), modes=M, period=float(S), slots=S)
    scale = D ** -0.5
    for t in range(T):
        z = scale * (k[0, : t + 1, 0] @ q[0, t, 0])
        e = torch.exp(z)
        want = (e[:, None] * v[0, : t + 1, 0]).sum(0) / (e.sum() + (S - t - 1))
        assert torch.allclose(o[0, t, 0], want, atol=1e-12), t
