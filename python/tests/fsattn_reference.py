"""Float64 PyTorch references of IDA and BLA, token by token, written from docs/spec.md (§1,
§2) and differentiable by torch.autograd; and helpers shared by the tests."""

import math
from typing import Optional, Sequence

import torch

f64 = torch.float64


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """Relative Frobenius error ||got - want|| / ||want|| (docs/spec.md §4), in float64."""
    got, want = got.detach().to("cpu", f64), want.detach().to("cpu", f64)
    assert got.shape == want.shape, (got.shape, want.shape)
    den = want.norm().item()
    num = (got - want).norm().item()
    return num / den if den > 0 else num


def dirichlet_weights(slots: int, modes: int, period: float, t: int) -> torch.Tensor:
    """φ_t[j] = D_M(a_j − t) / W with a_j = j W / S; t reduced modulo W in double first."""
    W = float(period)
    r = math.fmod(float(t), W)
    x = torch.arange(slots, dtype=f64) * W / slots - r
    d = torch.ones(slots, dtype=f64)
    for m in range(1, modes + 1):
        d = d + 2.0 * torch.cos(2.0 * math.pi * m * x / W)
    return d / W


def bla_reference(q, k, v, log_gamma, *, modes: int, period: float, slots: int, scale: Optional[float] = None,
                  pos0: int = 0, initial_state=None):
    """BLA (docs/spec.md §2). q, k [B,T,H,Dk], v [B,T,H,Dv], log_gamma [H]; states
    [B,H,S,Dk], [B,H,S,Dv]. Returns (o, (Ks_T, Vs_T))."""
    B, T, H, Dk = q.shape
    Dv = v.shape[3]
    S = slots
    scale = Dk ** -0.5 if scale is None else scale
    if initial_state is None:
        Ks = torch.zeros(B, H, S, Dk, dtype=f64)
        Vs = torch.zeros(B, H, S, Dv, dtype=f64)
    else:
        Ks, Vs = initial_state
    gamma = torch.exp(log_gamma).view(1, H, 1, 1)
    outs = []
    for i in range(T):
        phi = dirichlet_weights(S, modes, period, pos0 + i).view(1, 1, S, 1)
        Ks = gamma * Ks + phi * k[:, i].unsqueeze(2)
        Vs = gamma * Vs + phi * v[:, i].unsqueeze(2)
        z = scale * (Ks * q[:, i].unsqueeze(2)).sum(-1)  # [B,H,S]
        pi = torch.softmax(z, dim=-1)
        outs.append((pi.unsqueeze(-1) * Vs).sum(2))  # [B,H,Dv]
    return torch.stack(outs, dim=1), (Ks, Vs)


def _xi(x, eps):
    s = torch.nn.functional.silu(x)
    return s / torch.sqrt((s * s).sum(-1, keepdim=True) + eps)


def _rms(x, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def ida_reference(q, k, v, params, *, eps: Optional[float] = None, initial_state=None):
    """IDA (docs/spec.md §1), the plain readout o_t = Re(fq^T U^T Γ) with U = C Xk, Γ = C Xv.
    params: (gk, bk, gv, bv, log_dt, A_re_log, A_im, B [H,M,2], C [H,M,M,2]); states
    [B,H,M,Dk,2], [B,H,M,Dv,2]. Returns (o, (Xk_T, Xv_T)) with states as real [..., 2]."""
    gk, bk, gv, bv, log_dt, A_re_log, A_im, Bp, Cp = params
    eps = 1e-6 if eps is None else eps
    Bsz, T, H, Dk = q.shape
    Dv = v.shape[3]
    M = A_re_log.shape[1]
    fq = _xi(q, eps)
    kt = _rms(_xi(k, eps), eps) * gk + bk
    vt = _rms(v, eps) * gv + bv
    dtA = torch.exp(log_dt).view(H, 1) * torch.complex(-torch.exp(A_re_log), A_im)  # [H,M]
    lam = torch.exp(dtA).view(1, H, M, 1)
    Bc = torch.view_as_complex(Bp.contiguous()).view(1, H, M, 1)
    Cc = torch.view_as_complex(Cp.contiguous())  # [H, M(row), M(col)]
    if initial_state is None:
        Xk = torch.zeros(Bsz, H, M, Dk, dtype=torch.complex128)
        Xv = torch.zeros(Bsz, H, M, Dv, dtype=torch.complex128)
    else:
        Xk = torch.view_as_complex(initial_state[0].contiguous())
        Xv = torch.view_as_complex(initial_state[1].contiguous())
    outs = []
    for t in range(T):
        Xk = lam * Xk + Bc * kt[:, t].unsqueeze(2).to(torch.complex128)
        Xv = lam * Xv + Bc * vt[:, t].unsqueeze(2).to(torch.complex128)
        U = torch.einsum("hrm,bhmd->bhrd", Cc, Xk)  # C Xk  [B,H,M,Dk]
        G = torch.einsum("hrm,bhmc->bhrc", Cc, Xv)  # C Xv  [B,H,M,Dv]
        a = torch.einsum("bhrd,bhd->bhr", U, fq[:, t].to(torch.complex128))  # U fq  [B,H,M]
        outs.append(torch.einsum("bhr,bhrc->bhc", a, G).real)  # Re(fq^T U^T Γ)
    return torch.stack(outs, dim=1), (torch.view_as_real(Xk), torch.view_as_real(Xv))


def ida_init(H: int, Dk: int, Dv: int, M: int, gen: torch.Generator, perturb: bool = True):
    """float32 IDA parameters: the spec's reference initialisation, perturbed (so that every
    parameter, gk/bk/gv/bv and B included, is generic in the gradient tests)."""
    n = torch.arange(M, dtype=f64)
    a_im = ((M / math.pi) * (M / (2 * n + 1) - 1)).repeat(H, 1)
    log_dt = torch.empty(H, dtype=f64).uniform_(math.log(1e-3), math.log(1e-1), generator=gen)
    C = torch.randn(H, M, M, 2, dtype=f64, generator=gen) / math.sqrt(2 * M)
    p = [torch.ones(H, Dk, dtype=f64), torch.zeros(H, Dk, dtype=f64), torch.ones(H, Dv, dtype=f64),
         torch.zeros(H, Dv, dtype=f64), log_dt, torch.full((H, M), math.log(0.5), dtype=f64), a_im,
         torch.stack([torch.ones(H, M, dtype=f64), torch.zeros(H, M, dtype=f64)], -1), C]
    if perturb:
        for i in (0, 1, 2, 3, 7):
            p[i] = p[i] + 0.2 * torch.randn(p[i].shape, dtype=f64, generator=gen)
        p[5] = p[5] + 0.2 * torch.randn(p[5].shape, dtype=f64, generator=gen)
        # Larger steps than the reference's, so that the modes decay within a short test.
        p[4] = torch.empty(H, dtype=f64).uniform_(math.log(0.05), math.log(0.5), generator=gen)
        p[6] = p[6] / M  # slower rotations: the phases stay well conditioned in float32
    return [x.float() for x in p]


def randn(shape: Sequence[int], gen: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen, dtype=f64) * scale).float()


def leaf64(x: torch.Tensor) -> torch.Tensor:
    """A float64 leaf copy of the float32 x (the reference starts from the kernel's values)."""
    return x.detach().to(f64).clone().requires_grad_(True)


def leaf32(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)


def loss_of(o, state, d_o, d_state):
    """L = <d_o, o> + <d_state_k, state_k> + <d_state_v, state_v> (docs/spec.md §5)."""
    total = 0
    if d_o is not None:
        total = total + (o * d_o.to(o.dtype)).sum()
    if d_state is not None:
        total = total + (state[0] * d_state[0].to(state[0].dtype)).sum() + (state[1] * d_state[1].to(state[1].dtype)).sum()
    return total


def grads(loss, leaves):
    """torch.autograd.grad with zeros for leaves the loss does not depend on."""
    gs = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(gs, leaves)]


def assert_grads_close(got, want, names, tol):
    for name, a, b in zip(names, got, want):
        if b.norm() < 1e-10:  # a zero gradient (e.g. dq when only the state enters the loss)
            assert a.norm() < 1e-6, name
            continue
        assert rel_err(a, b) <= tol, name
