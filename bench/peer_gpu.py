#!/usr/bin/env python3
"""Peer comparison for the fsattn GPU benchmark: plain-PyTorch chunked IDA and BLA vs. SDPA.

What it times, at the same (B, T, H, D):
  ida_torch   IDA (docs/spec.md §1, the cheap p/w readout), chunked as in docs/spec.md §3,
              float32 with complex64 scans.
  bla_torch   BLA (docs/spec.md §2), chunked as in docs/spec.md §3, float32.
  sdpa_flash  torch.nn.functional.scaled_dot_product_attention, causal, bfloat16, restricted to
              the FlashAttention backend: the softmax-attention baseline.
  fla_gsa, fla_gsa_bf16
              flash-linear-attention's chunk_gsa (gated slot attention: keys and values
              written into S slots with per-slot decay, read by a softmax over the slots, the
              computation BLA's is shaped like) in float32 and bfloat16, S = --bla-slots; from
              a copy of FLA's source named by --fla (its fla/ directory's parent).

Only the forward pass is written out; autograd provides the backward. Each method is timed for
the forward alone (under no_grad) and for forward + backward of loss = (o * do).sum() with a
fixed random do, with triton.testing.do_bench (median). A method that fails (out of memory, a
backend that refuses the shape, ...) is recorded as an error and the run goes on.

Usage:
  python3 bench/peer_gpu.py                                   # B=8 T=4096 H=16 D=64
  python3 bench/peer_gpu.py --seqlens 1024 2048 4096 8192 16384 32768 65536 --json peer.json
  python3 bench/peer_gpu.py --device cpu --check              # math self-check only (CPU is fine)
  python3 bench/peer_gpu.py --device cpu --B 1 --T 256 --H 2 --D 16   # smoke test of the timing

With --seqlens, every T in the list is run with B = max(1, 32768 // T), so the number of tokens
stays the same. --check compares both chunked implementations (forward and gradients) against a
naive token-by-token float64 recurrence at a tiny shape and exits; non-zero status on failure.
"""

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# -------------------------------------------------------------------------------------------
# Shared pieces
# -------------------------------------------------------------------------------------------


def log(*args):
    print(*args, flush=True)


def to_chunks(x, L):
    """[B, T, H, D] -> [B, H, N, L, D], zero-padded at the end to N*L tokens.

    Padding at the end is harmless: the mixers are causal, so the padded tokens never reach the
    outputs of real tokens, and the padded outputs are cut off again in from_chunks.
    """
    B, T, H, D = x.shape
    N = -(-T // L)
    x = x.transpose(1, 2)
    if N * L != T:
        x = F.pad(x, (0, 0, 0, N * L - T))
    return x.reshape(B, H, N, L, D)


def from_chunks(x, T):
    """[B, H, N, L, D] -> [B, T, H, D]."""
    B, H, N, L, D = x.shape
    return x.reshape(B, H, N * L, D)[:, :, :T].transpose(1, 2)


def chunk_start_states(dX, decay_L):
    """Serial carry over chunks (zero initial state).

    dX[:, :, n] is chunk n's own contribution to the state at its end, decay_L the per-slot decay
    over one whole chunk. Returns the state in force at the start of every chunk,
    [B, H, N, ...]. This is the only sequential part; everything else is batched over chunks.
    """
    X = torch.zeros_like(dX[:, :, 0])
    starts = []
    for n in range(dX.shape[2]):
        starts.append(X)
        X = decay_L * X + dX[:, :, n]
    return torch.stack(starts, dim=2)


def causal_offsets(L, device):
    """(i - tau) clamped at 0 for tokens i, tau of a chunk, and the mask tau <= i."""
    i = torch.arange(L, device=device)
    diff = i[:, None] - i[None, :]
    return diff.clamp(min=0), diff >= 0


# -------------------------------------------------------------------------------------------
# BLA
# -------------------------------------------------------------------------------------------


def bla_phi(T, S, M, W, device, pos0=0):
    """Write weights phi_t[j] = D_M(a_j - t) / W, [T, S] float32.

    Computed in float64 from t mod W (docs/spec.md §2) and rounded once. phi depends only on the
    positions, so it is built once outside the timed region, as a host model would cache it.
    """
    t = torch.arange(T, dtype=torch.float64, device=device) + pos0
    a = torch.arange(S, dtype=torch.float64, device=device) * (W / S)
    x = a[None, :] - torch.remainder(t, W)[:, None]
    dirichlet = torch.ones_like(x)
    for m in range(1, M + 1):
        dirichlet += 2.0 * torch.cos(2.0 * math.pi * m * x / W)
    return (dirichlet / W).float()


def bla_chunked(q, k, v, log_gamma, phi, scale, L=64):
    """BLA forward, chunked with chunk length L. q, k [B,T,H,Dk], v [B,T,H,Dv] -> o [B,T,H,Dv]."""
    B, T, H, _ = q.shape
    qc, kc, vc = to_chunks(q, L), to_chunks(k, L), to_chunks(v, L)
    N = qc.shape[2]
    ph = F.pad(phi, (0, 0, 0, N * L - T)).reshape(N, L, -1)  # [N, L, S]

    # Powers of gamma as exp(n * log gamma), never by repeated products (docs/spec.md §3).
    lg = log_gamma.view(H, 1, 1)
    off, mask = causal_offsets(L, q.device)
    pos = torch.arange(L, device=q.device, dtype=q.dtype)
    decay_intra = torch.where(mask, torch.exp(off * lg), 0.0)   # gamma^(i-tau), tau <= i  [H,L,L]
    decay_in = torch.exp((pos + 1).view(1, L, 1) * lg)           # gamma^(i+1)              [H,L,1]
    decay_out = torch.exp((L - 1 - pos).view(1, L, 1) * lg)      # gamma^(L-1-tau)          [H,L,1]
    decay_L = torch.exp(L * lg)                                  # gamma^L                  [H,1,1]

    # Chunk-start slot states: each chunk's contribution phi_tau (x) x_tau, decayed to its end.
    write = (ph.unsqueeze(0) * decay_out.unsqueeze(1)).transpose(-1, -2)  # [H, N, S, L]
    Ks = chunk_start_states(write @ kc, decay_L)                           # [B, H, N, S, Dk]
    Vs = chunk_start_states(write @ vc, decay_L)                           # [B, H, N, S, Dv]

    # Pass 1, read by q: z_i[j] = scale * Ks_i[j] . q_i, intra-chunk part as a masked matmul.
    qk = (qc @ kc.transpose(-1, -2)) * decay_intra.unsqueeze(1)            # [B, H, N, L, L]
    z = qk @ ph + decay_in.unsqueeze(1) * (qc @ Ks.transpose(-1, -2))
    pi = torch.softmax(scale * z, dim=-1)                                  # [B, H, N, L, S]

    # Pass 2, read by pi: o_i = sum_j pi_i[j] Vs_i[j].
    pv = (pi @ ph.transpose(-1, -2)) * decay_intra.unsqueeze(1)            # [B, H, N, L, L]
    o = pv @ vc + decay_in.unsqueeze(1) * (pi @ Vs)
    return from_chunks(o, T)


def bla_naive(q, k, v, log_gamma, phi, scale):
    """Token-by-token BLA recurrence (any dtype; used in float64 by --check)."""
    B, T, H, Dk = q.shape
    gamma = torch.exp(log_gamma).view(1, H, 1, 1)
    Ks = q.new_zeros(B, H, phi.shape[1], Dk)
    Vs = q.new_zeros(B, H, phi.shape[1], v.shape[-1])
    outs = []
    for t in range(T):
        w = phi[t].view(1, 1, -1, 1)
        Ks = gamma * Ks + w * k[:, t].unsqueeze(2)
        Vs = gamma * Vs + w * v[:, t].unsqueeze(2)
        z = scale * torch.einsum("bhsd,bhd->bhs", Ks, q[:, t])
        outs.append(torch.einsum("bhs,bhsd->bhd", torch.softmax(z, dim=-1), Vs))
    return torch.stack(outs, dim=1)


# -------------------------------------------------------------------------------------------
# IDA
# -------------------------------------------------------------------------------------------


def xi(x, eps):
    s = F.silu(x)
    return s * torch.rsqrt((s * s).sum(-1, keepdim=True) + eps)


def rms(x, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)


def ida_features(q, k, v, p, eps):
    """fq = xi(q), kt = rms(xi(k)) * gk + bk, vt = rms(v) * gv + bv (per head)."""
    fq = xi(q, eps)
    kt = rms(xi(k, eps), eps) * p["gk"] + p["bk"]
    vt = rms(v, eps) * p["gv"] + p["bv"]
    return fq, kt, vt


def ida_log_lambda(p, dtype):
    """dt * A_m, [H, M] complex: log of the mode decays Lambda_m = exp(dt * A_m)."""
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    dt = torch.exp(p["log_dt"].to(real)).unsqueeze(-1)
    A = torch.complex(-torch.exp(p["A_re_log"].to(real)), p["A_im"].to(real))
    return dt * A


def ida_chunked(q, k, v, p, L=64, eps=1e-6):
    """IDA forward (p/w form), chunked with chunk length L.

    q, k [B,T,H,Dk], v [B,T,H,Dv] float32; p holds the docs/spec.md §1 parameters, B [H,M] and
    C [H,M,M] as complex64. Returns o [B,T,H,Dv] float32.
    """
    B, T, H, _ = q.shape
    fq, kt, vt = ida_features(q, k, v, p, eps)
    fq, kt, vt = to_chunks(fq, L), to_chunks(kt, L), to_chunks(vt, L)
    cf = torch.complex64

    # Lambda^n for n = 0..L. The phase n * dt * Im A reaches thousands of radians for M = 64, so
    # the table is built in float64 and rounded once (as the Halide kernels do); it depends on
    # the parameters only, [L+1, H, M].
    n = torch.arange(L + 1, device=q.device, dtype=torch.float64).view(-1, 1, 1)
    lam_pow = torch.exp(n * ida_log_lambda(p, torch.complex128).unsqueeze(0)).to(cf)
    off, mask = causal_offsets(L, q.device)
    decay_intra = (lam_pow[off] * mask[..., None, None].to(cf)).permute(2, 0, 1, 3)  # [H, L(i), L(tau), M]
    decay_in = lam_pow[1:].transpose(0, 1)                                     # Lambda^(i+1)  [H, L, M]
    decay_out = lam_pow[:L].flip(0).transpose(0, 1)                            # Lambda^(L-1-tau) [H, L, M]
    decay_L = lam_pow[L].unsqueeze(-1)                                         # [H, M, 1]
    Bm = p["B"].view(H, 1, -1)                                                 # [H, 1, M]

    # Chunk-start states Xk, Xv [B, H, N, M, D]: each chunk adds sum_tau Lambda^(L-1-tau) B x_tau.
    write = Bm * decay_out                                                     # [H, L, M]
    Xk = chunk_start_states(torch.einsum("htm,bhntr->bhnmr", write, kt.to(cf)), decay_L)
    Xv = chunk_start_states(torch.einsum("htm,bhntc->bhnmc", write, vt.to(cf)), decay_L)

    # Pass 1, read by fq: p_i = Xk_i fq_i. The intra-chunk decay depends on the mode, so the
    # masked score matrix is contracted with the [i, tau, m] decay table.
    score = (fq @ kt.transpose(-1, -2)).to(cf)                                 # [B, H, N, L, L]
    p_modes = Bm.unsqueeze(1) * torch.einsum("bhnit,hitm->bhnim", score, decay_intra)
    p_modes = p_modes + decay_in.unsqueeze(1) * torch.einsum("bhnmr,bhnir->bhnim", Xk, fq.to(cf))

    # Mode mixing w = G p with G = C^T C (plain transpose, docs/spec.md §1).
    C = p["C"]
    G = C.transpose(-1, -2) @ C                                                # [H, M, M]
    w = torch.einsum("hmj,bhnij->bhnim", G, p_modes)                           # [B, H, N, L, M]

    # Pass 2, read by w: o_i = Re(Xv_i^T w_i).
    wv = torch.einsum("bhnim,hitm->bhnit", w * Bm.unsqueeze(1), decay_intra)   # [B, H, N, L, L]
    o = wv.real @ vt
    o = o + torch.einsum("bhnim,bhnmc->bhnic", w * decay_in.unsqueeze(1), Xv).real
    return from_chunks(o, T)


def ida_naive(q, k, v, p, eps=1e-6):
    """Token-by-token IDA with the literal U = C Xk, Gamma = C Xv readout (complex128 in --check)."""
    B, T, H, Dk = q.shape
    fq, kt, vt = ida_features(q, k, v, p, eps)
    lam = torch.exp(ida_log_lambda(p, torch.complex128)).view(1, H, -1, 1)
    Bm = p["B"].view(1, H, -1, 1)
    C = p["C"]
    M = lam.shape[2]
    Xk = torch.zeros(B, H, M, Dk, dtype=torch.complex128, device=q.device)
    Xv = torch.zeros(B, H, M, v.shape[-1], dtype=torch.complex128, device=q.device)
    outs = []
    for t in range(T):
        Xk = lam * Xk + Bm * kt[:, t].unsqueeze(2)
        Xv = lam * Xv + Bm * vt[:, t].unsqueeze(2)
        U = torch.einsum("hmj,bhjr->bhmr", C, Xk)
        Gam = torch.einsum("hmj,bhjc->bhmc", C, Xv)
        Ufq = torch.einsum("bhmr,bhr->bhm", U, fq[:, t].to(torch.complex128))
        outs.append(torch.einsum("bhm,bhmc->bhc", Ufq, Gam).real)
    return torch.stack(outs, dim=1)


def ida_reference_params(H, M, gen):
    """S4D-Inv reference initialisation of docs/spec.md §1 (gk = gv = 1, bk = bv = 0, B = 1)."""
    n = torch.arange(M, dtype=torch.float64)
    a_im = (M / math.pi) * (M / (2 * n + 1) - 1)
    lo, hi = math.log(1e-3), math.log(1e-1)
    c = torch.complex(torch.randn(H, M, M, generator=gen), torch.randn(H, M, M, generator=gen))
    return {
        "log_dt": lo + (hi - lo) * torch.rand(H, generator=gen),
        "A_re_log": torch.full((H, M), math.log(0.5)),
        "A_im": a_im.float().expand(H, M).clone(),
        "B": torch.ones(H, M, dtype=torch.complex64),
        "C": c * math.sqrt(0.5 / M),  # complex normal, variance 1/M
    }


def ida_norm_params(H, Dk, Dv):
    return {"gk": torch.ones(H, Dk), "bk": torch.zeros(H, Dk), "gv": torch.ones(H, Dv), "bv": torch.zeros(H, Dv)}


# -------------------------------------------------------------------------------------------
# Self-check (--check)
# -------------------------------------------------------------------------------------------


def rel_err(a, b):
    a, b = a.detach().to(torch.complex128), b.detach().to(torch.complex128)
    return ((a - b).abs().norm() / b.abs().norm().clamp_min(1e-300)).item()


def forward_and_grads(fn, leaves, do):
    """o = fn(), and the gradients of (o * do).sum() with respect to every leaf."""
    o = fn()
    grads = torch.autograd.grad((o * do).sum(), list(leaves.values()))
    return o, dict(zip(leaves, grads))


def widen(leaves):
    """float64 / complex128 leaf copies of float32 / complex64 leaves."""
    out = {}
    for name, x in leaves.items():
        wide = torch.complex128 if x.is_complex() else torch.float64
        out[name] = x.detach().to(wide).requires_grad_(True)
    return out


def compare(label, chunked, naive, fwd_tol=1e-5, grad_tol=1e-4):
    """Prints forward and gradient relative errors; returns True when all are within tolerance."""
    o32, g32 = chunked
    o64, g64 = naive
    ok = True
    e = rel_err(o32, o64)
    ok &= e < fwd_tol
    log(f"  {label:14s} forward      rel err {e:.2e}  (tol {fwd_tol:.0e})")
    for name in g32:
        e = rel_err(g32[name], g64[name])
        ok &= e < grad_tol
        log(f"  {label:14s} d{name:11s} rel err {e:.2e}  (tol {grad_tol:.0e})")
    return ok


def run_check(device):
    """Chunked float32 vs naive float64 at a tiny shape, for two chunk lengths."""
    B, T, H, D, M_ida, S, M_bla, W = 1, 100, 2, 8, 4, 5, 4, 7.5
    gen = torch.Generator().manual_seed(0)

    def rnd(*shape, lo=-2.0, hi=2.0):
        return (lo + (hi - lo) * torch.rand(*shape, generator=gen)).to(device)

    q, k, v, do = rnd(B, T, H, D), rnd(B, T, H, D), rnd(B, T, H, D), rnd(B, T, H, D)

    # General (non-reference) parameter values so that every term of the math is exercised.
    ida = ida_reference_params(H, M_ida, gen)
    ida["A_re_log"] = ida["A_re_log"] + 0.3 * torch.randn(H, M_ida, generator=gen)
    ida["B"] = torch.complex(torch.rand(H, M_ida, generator=gen) + 0.5, torch.rand(H, M_ida, generator=gen) - 0.5)
    ida.update(gk=rnd(H, D, lo=0.5, hi=1.5).cpu(), bk=rnd(H, D, lo=-0.5, hi=0.5).cpu(),
               gv=rnd(H, D, lo=0.5, hi=1.5).cpu(), bv=rnd(H, D, lo=-0.5, hi=0.5).cpu())
    ida_leaves = {"q": q, "k": k, "v": v, **{n: x.to(device) for n, x in ida.items()}}
    ida_leaves = {n: x.clone().requires_grad_(True) for n, x in ida_leaves.items()}

    log_gamma = rnd(H, lo=math.log(0.8), hi=0.0)
    phi = bla_phi(T, S, M_bla, W, device)
    scale = D ** -0.5
    bla_leaves = {n: x.clone().requires_grad_(True) for n, x in
                  {"q": q, "k": k, "v": v, "log_gamma": log_gamma}.items()}

    log(f"check: B={B} T={T} H={H} D={D}  IDA M={M_ida}  BLA S={S} M={M_bla} W={W}  on {device}")
    w_ida, w_bla = widen(ida_leaves), widen(bla_leaves)
    ida_ref = forward_and_grads(
        lambda: ida_naive(w_ida["q"], w_ida["k"], w_ida["v"], w_ida), w_ida, do.double())
    bla_ref = forward_and_grads(
        lambda: bla_naive(w_bla["q"], w_bla["k"], w_bla["v"], w_bla["log_gamma"], phi.double(), scale),
        w_bla, do.double())

    ok = True
    for L in (64, 16):
        ida_out = forward_and_grads(
            lambda: ida_chunked(ida_leaves["q"], ida_leaves["k"], ida_leaves["v"], ida_leaves, L=L),
            ida_leaves, do)
        bla_out = forward_and_grads(
            lambda: bla_chunked(bla_leaves["q"], bla_leaves["k"], bla_leaves["v"], bla_leaves["log_gamma"],
                                phi, scale, L=L), bla_leaves, do)
        ok &= compare(f"IDA L={L}", ida_out, ida_ref)
        ok &= compare(f"BLA L={L}", bla_out, bla_ref)
    log("check:", "PASSED" if ok else "FAILED")
    return ok


# -------------------------------------------------------------------------------------------
# Benchmark
# -------------------------------------------------------------------------------------------


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn, device, grad_to_none):
    """Median milliseconds of fn(): triton's do_bench on CUDA, a few perf_counter runs on CPU."""
    if device.type == "cuda":
        import triton.testing
        return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, return_mode="median")
    fn()  # warm-up
    runs = []
    for _ in range(5):
        for x in grad_to_none or []:
            x.grad = None
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(runs)


def make_methods(args, B, T, device):
    """Builds each method's inputs; returns {name: (forward closure, leaves needing grads)}."""
    H, D = args.H, args.D
    gen = torch.Generator().manual_seed(args.seed)

    def act():
        # Uniform in [-2, 2], like the project's benchmark cases.
        return (4 * torch.rand(B, T, H, D, generator=gen) - 2).to(device)

    q, k, v = act(), act(), act()
    methods = {}

    def ida():
        params = {**ida_norm_params(H, D, D), **ida_reference_params(H, args.ida_modes, gen)}
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        p = {n: x.to(device).requires_grad_(True) for n, x in params.items()}
        return (lambda: ida_chunked(*leaves, p, L=args.chunk)), leaves + list(p.values())

    def bla():
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        log_gamma = (math.log(0.9) * torch.rand(H, generator=gen)).to(device).requires_grad_(True)
        phi = bla_phi(T, args.bla_slots, args.bla_modes, args.bla_period, device)
        return (lambda: bla_chunked(*leaves, log_gamma, phi, D ** -0.5, L=args.chunk)), leaves + [log_gamma]

    def sdpa():
        from torch.nn.attention import SDPBackend, sdpa_kernel
        leaves = [t.to(torch.bfloat16).requires_grad_(True) for t in (q, k, v)]

        def fn():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                # [B, T, H, D] -> [B, H, T, D] views; the flash kernel takes these strides.
                qh, kh, vh = (x.transpose(1, 2) for x in leaves)
                return F.scaled_dot_product_attention(qh, kh, vh, is_causal=True).transpose(1, 2)
        return fn, leaves

    def fla_gsa(dtype):
        def build():
            if args.fla:
                sys.path.insert(0, args.fla)
            from fla.ops.gsa import chunk_gsa
            S = args.bla_slots
            leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
            slots = torch.randn(B, T, H, S, generator=gen).to(device=device, dtype=dtype).requires_grad_(True)
            # Log decays of about 0.9 per token and slot, as FLA's own tests draw them.
            g = F.logsigmoid(torch.randn(B, T, H, S, generator=gen) + 2.2).to(device=device, dtype=dtype)
            g.requires_grad_(True)
            return (lambda: chunk_gsa(*leaves, slots, g)[0]), leaves + [slots, g]
        return build

    for name, build in (("ida_torch", ida), ("bla_torch", bla), ("sdpa_flash", sdpa),
                        ("fla_gsa", fla_gsa(torch.float32)), ("fla_gsa_bf16", fla_gsa(torch.bfloat16))):
        if name in args.methods:
            methods[name] = build
    return methods


def bench_one(name, build, B, T, args, device):
    """Times one method at one shape; errors are recorded, never raised."""
    rec = {"method": name, "B": B, "T": T, "H": args.H, "D": args.D, "fwd_ms": None, "fwdbwd_ms": None}
    try:
        fwd, leaves = build()
        gen = torch.Generator().manual_seed(args.seed + 1)
        with torch.no_grad():
            o = fwd()
        do = torch.randn(o.shape, generator=gen).to(device=device, dtype=o.dtype)
        del o

        def forward():
            with torch.no_grad():
                fwd()

        def forward_backward():
            (fwd() * do).sum().backward()

        rec["fwd_ms"] = time_ms(forward, device, None)
        rec["fwdbwd_ms"] = time_ms(forward_backward, device, leaves)
    except Exception as e:  # OOM, a backend refusing the shape, ...: record it and go on
        rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if device.type == "cuda":
        rec["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()
    fmt = lambda x: "-" if x is None else f"{x:.3f} ms"
    log(f"{name:10s} B={B} T={T}: fwd {fmt(rec['fwd_ms'])}, fwd+bwd {fmt(rec['fwdbwd_ms'])}"
        + (f"  [{rec['error']}]" if "error" in rec else ""))
    return rec


def print_table(results):
    log("")
    log(f"{'method':12s} {'shape':28s} {'fwd ms':>10s} {'fwd+bwd ms':>12s}")
    for r in results:
        shape = f"B={r['B']} T={r['T']} H={r['H']} D={r['D']}"
        fwd = "error" if r["fwd_ms"] is None else f"{r['fwd_ms']:.3f}"
        both = "error" if r["fwdbwd_ms"] is None else f"{r['fwdbwd_ms']:.3f}"
        log(f"{r['method']:12s} {shape:28s} {fwd:>10s} {both:>12s}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--D", type=int, default=64, help="Dk = Dv")
    ap.add_argument("--seqlens", type=int, nargs="+",
                    help="run every T in the list with B = max(1, 32768 // T) (--B and --T ignored)")
    ap.add_argument("--ida-modes", type=int, default=64, help="IDA M")
    ap.add_argument("--bla-slots", type=int, default=64, help="BLA S")
    ap.add_argument("--bla-modes", type=int, default=31, help="BLA M")
    ap.add_argument("--bla-period", type=float, default=256.0, help="BLA W")
    ap.add_argument("--chunk", type=int, default=64, help="chunk length L")
    ap.add_argument("--methods", nargs="+", default=["ida_torch", "bla_torch", "sdpa_flash"],
                    choices=["ida_torch", "bla_torch", "sdpa_flash", "fla_gsa", "fla_gsa_bf16"])
    ap.add_argument("--fla", metavar="DIR", help="directory holding FLA's fla/ package (fla_gsa methods)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", metavar="PATH", help="write the results here")
    ap.add_argument("--check", action="store_true", help="only run the float64 self-check at a tiny shape")
    return ap.parse_args()


def main():
    args = parse_args()
    # Keep float32 matmuls in float32: TF32 would not meet the tolerances of docs/spec.md §4 and would not be
    # the same arithmetic as the kernels being compared.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)

    if args.check:
        sys.exit(0 if run_check(device) else 1)

    shapes = [(max(1, 32768 // T), T) for T in args.seqlens] if args.seqlens else [(args.B, args.T)]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    log(f"device {name}, torch {torch.__version__}; IDA M={args.ida_modes}; "
        f"BLA S={args.bla_slots} M={args.bla_modes} W={args.bla_period}; chunk L={args.chunk}")
    results = []
    for B, T in shapes:
        for method, build in make_methods(args, B, T, device).items():
            results.append(bench_one(method, build, B, T, args, device))

    if args.json:
        meta = {"device": name, "torch": torch.__version__, "ida_modes": args.ida_modes,
                "bla_slots": args.bla_slots, "bla_modes": args.bla_modes, "bla_period": args.bla_period,
                "chunk": args.chunk}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)
        log(f"wrote {args.json}")
    print_table(results)


if __name__ == "__main__":
    main()
