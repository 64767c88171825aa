"""fsattn.bla, bla_step and bla_interpolate against the float64 reference (docs/spec.md §2, §4)."""

import math

import pytest
import torch

import fsattn
from fsattn_reference import assert_grads_close, grads, bla_reference, dirichlet_weights, leaf32, leaf64, loss_of, randn, rel_err

FWD_TOL = 1e-5  # docs/spec.md §4
GRAD_TOL = 1e-4

# B, T, H, Dk, Dv, S, M, W, pos0
SHAPES = [
    (2, 13, 2, 5, 3, 7, 3, 11.5, 5),
    (1, 9, 3, 4, 6, 5, 0, 4.0, 0),
    (3, 1, 1, 1, 2, 1, 1, 1.0, 2),
    (1, 37, 2, 8, 8, 16, 7, 24.0, 123456789),
]


def make_inputs(shape, gen, with_state=True):
    B, T, H, Dk, Dv, S, M, W, pos0 = shape
    q, k = randn((B, T, H, Dk), gen), randn((B, T, H, Dk), gen)
    v = randn((B, T, H, Dv), gen)
    log_gamma = torch.log(torch.rand(H, generator=gen, dtype=torch.float64) * 0.3 + 0.69).float()
    state = (randn((B, H, S, Dk), gen, 0.3), randn((B, H, S, Dv), gen, 0.3)) if with_state else None
    hyper = dict(modes=M, period=W, slots=S, pos0=pos0)
    return [q, k, v, log_gamma], state, hyper


def run_lib(inputs, state, hyper, **kw):
    q, k, v, lg = inputs
    return fsattn.bla(q, k, v, lg, initial_state=state, output_final_state=True, **hyper, **kw)


def run_ref(inputs, state, hyper, **kw):
    q, k, v, lg = inputs
    return bla_reference(q, k, v, lg, initial_state=state, **hyper, **kw)


def check_against_reference(shape, gen, with_state, use_o=True, use_state=True, scale=None):
    inputs, state, hyper = make_inputs(shape, gen, with_state)
    B, T, H, Dk, Dv, S = shape[:6]
    d_o = randn((B, T, H, Dv), gen) if use_o else None
    d_state = (randn((B, H, S, Dk), gen), randn((B, H, S, Dv), gen)) if use_state else None

    x32 = [leaf32(x) for x in inputs]
    s32 = tuple(leaf32(x) for x in state) if with_state else None
    o, st = run_lib(x32, s32, hyper, scale=scale)
    x64 = [leaf64(x) for x in inputs]
    s64 = tuple(leaf64(x) for x in state) if with_state else None
    o_ref, st_ref = run_ref(x64, s64, hyper, scale=scale)

    assert o.dtype == torch.float32 and o.shape == (B, T, H, Dv)
    assert rel_err(o, o_ref) <= FWD_TOL
    assert rel_err(st[0], st_ref[0]) <= FWD_TOL
    assert rel_err(st[1], st_ref[1]) <= FWD_TOL

    leaves32 = x32 + (list(s32) if with_state else [])
    leaves64 = x64 + (list(s64) if with_state else [])
    g = grads(loss_of(o, st, d_o, d_state), leaves32)
    g_ref = grads(loss_of(o_ref, st_ref, d_o, d_state), leaves64)
    # (dq is 0 with M = 0 and a zero state: every slot is equal and the softmax flat)
    assert_grads_close(g, g_ref, ["q", "k", "v", "log_gamma", "state_k", "state_v"], GRAD_TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_state", [False, True])
def test_forward_and_gradients(shape, with_state, gen):
    check_against_reference(shape, gen, with_state)


def test_gradients_of_o_only_and_of_state_only(gen):
    check_against_reference(SHAPES[0], gen, True, use_o=True, use_state=False)
    check_against_reference(SHAPES[0], gen, True, use_o=False, use_state=True)


def test_explicit_scale(gen):
    check_against_reference(SHAPES[0], gen, True, scale=0.7)


def test_without_final_state(gen):
    inputs, state, hyper = make_inputs(SHAPES[0], gen)
    x32 = [leaf32(x) for x in inputs]
    o, st = fsattn.bla(*x32, **hyper)
    assert st is None
    x64 = [leaf64(x) for x in inputs]
    o_ref, _ = run_ref(x64, None, hyper)
    assert rel_err(o, o_ref) <= FWD_TOL
    d_o = randn(o.shape, gen)
    g = grads((o * d_o).sum(), x32)
    g_ref = grads((o_ref * d_o.double()).sum(), x64)
    for a, b in zip(g, g_ref):
        assert rel_err(a, b) <= GRAD_TOL


def test_varlen_equals_separate_calls(gen):
    H, Dk, Dv, S, M, W, pos0 = 2, 4, 3, 6, 2, 9.0, 3
    lengths = [4, 0, 7, 1]
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    T, N = cu[-1], len(lengths)
    q, k = randn((1, T, H, Dk), gen), randn((1, T, H, Dk), gen)
    v = randn((1, T, H, Dv), gen)
    lg = torch.log(torch.tensor([0.9, 0.97]))
    sk0, sv0 = randn((N, H, S, Dk), gen, 0.3), randn((N, H, S, Dv), gen, 0.3)
    d_o, dsk, dsv = randn((1, T, H, Dv), gen), randn((N, H, S, Dk), gen), randn((N, H, S, Dv), gen)
    hyper = dict(modes=M, period=W, slots=S, pos0=pos0)

    for cu_arg in (torch.tensor(cu, dtype=torch.int32), torch.tensor(cu, dtype=torch.int64), cu):
        leaves = [leaf32(x) for x in (q, k, v, lg, sk0, sv0)]
        o, st = fsattn.bla(*leaves[:4], initial_state=(leaves[4], leaves[5]), output_final_state=True,
                           cu_seqlens=cu_arg, **hyper)
        g = grads(loss_of(o, st, d_o, (dsk, dsv)), leaves)

        # One call per sequence (an empty one keeps its state, and passes d_state through).
        g_sep = [torch.zeros_like(x) for x in (q, k, v, lg, sk0, sv0)]
        for s in range(N):
            a, b = cu[s], cu[s + 1]
            if a == b:
                assert torch.equal(st[0][s], sk0[s]) and torch.equal(st[1][s], sv0[s])
                g_sep[4][s], g_sep[5][s] = dsk[s], dsv[s]
                continue
            ls = [leaf32(x) for x in (q[:, a:b], k[:, a:b], v[:, a:b], lg, sk0[s:s + 1], sv0[s:s + 1])]
            o_s, st_s = fsattn.bla(*ls[:4], initial_state=(ls[4], ls[5]), output_final_state=True, **hyper)
            assert rel_err(o[:, a:b], o_s) <= FWD_TOL
            assert rel_err(st[0][s:s + 1], st_s[0]) <= FWD_TOL and rel_err(st[1][s:s + 1], st_s[1]) <= FWD_TOL
            gs = grads(loss_of(o_s, st_s, d_o[:, a:b], (dsk[s:s + 1], dsv[s:s + 1])), ls)
            g_sep[0][:, a:b], g_sep[1][:, a:b], g_sep[2][:, a:b] = gs[0], gs[1], gs[2]
            g_sep[3] += gs[3]
            g_sep[4][s], g_sep[5][s] = gs[4][0], gs[5][0]
        for name, a, b in zip(["q", "k", "v", "log_gamma", "state_k", "state_v"], g, g_sep):
            assert rel_err(a, b) <= GRAD_TOL, name


def test_state_chaining(gen):
    shape = (2, 17, 2, 5, 4, 7, 3, 10.0, 11)
    B, T, H, Dk, Dv, S = shape[:6]
    inputs, state, hyper = make_inputs(shape, gen)
    d_o = randn((B, T, H, Dv), gen)
    d_state = (randn((B, H, S, Dk), gen), randn((B, H, S, Dv), gen))

    x1 = [leaf32(x) for x in inputs] + [leaf32(x) for x in state]
    o, st = fsattn.bla(*x1[:4], initial_state=tuple(x1[4:]), output_final_state=True, **hyper)
    g1 = grads(loss_of(o, st, d_o, d_state), x1)

    T1 = 6
    x2 = [leaf32(x) for x in inputs] + [leaf32(x) for x in state]
    q, k, v, lg = x2[:4]
    h1 = dict(hyper)
    oa, sa = fsattn.bla(q[:, :T1], k[:, :T1], v[:, :T1], lg, initial_state=tuple(x2[4:]), output_final_state=True, **h1)
    h1["pos0"] = hyper["pos0"] + T1
    ob, sb = fsattn.bla(q[:, T1:], k[:, T1:], v[:, T1:], lg, initial_state=sa, output_final_state=True, **h1)
    o2 = torch.cat([oa, ob], 1)
    assert rel_err(o2, o) <= FWD_TOL
    assert rel_err(sb[0], st[0]) <= FWD_TOL and rel_err(sb[1], st[1]) <= FWD_TOL
    g2 = grads(loss_of(o2, sb, d_o, d_state), x2)
    for name, a, b in zip(["q", "k", "v", "log_gamma", "state_k", "state_v"], g2, g1):
        assert rel_err(a, b) <= GRAD_TOL, name


@pytest.mark.parametrize("with_state", [False, True])
def test_steps_equal_forward(with_state, gen):
    shape = (2, 11, 3, 5, 4, 7, 3, 6.5, 40)
    B, T, H, Dk, Dv, S = shape[:6]
    inputs, state, hyper = make_inputs(shape, gen, with_state)
    q, k, v, lg = inputs
    o, st = run_lib(inputs, state, hyper)
    sk = state[0].clone() if with_state else torch.zeros(B, H, S, Dk)
    sv = state[1].clone() if with_state else torch.zeros(B, H, S, Dv)
    outs = []
    for t in range(T):
        o_t, st_t = fsattn.bla_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], lg, (sk, sv),
                                    pos=hyper["pos0"] + t, modes=hyper["modes"], period=hyper["period"])
        assert st_t[0] is sk and st_t[1] is sv
        assert o_t.shape == (B, 1, H, Dv)
        outs.append(o_t)
    assert rel_err(torch.cat(outs, 1), o) <= FWD_TOL
    assert rel_err(sk, st[0]) <= FWD_TOL and rel_err(sv, st[1]) <= FWD_TOL
    # [B, H, D] tokens give [B, H, Dv]
    o3, _ = fsattn.bla_step(q[:, 0], k[:, 0], v[:, 0], lg, (sk, sv), pos=0, modes=hyper["modes"], period=hyper["period"])
    assert o3.shape == (B, H, Dv)


def test_step_state_not_contiguous_or_not_float32(gen):
    B, H, Dk, Dv, S = 2, 2, 3, 4, 5
    q, k, v = randn((B, 1, H, Dk), gen), randn((B, 1, H, Dk), gen), randn((B, 1, H, Dv), gen)
    lg = torch.log(torch.tensor([0.9, 0.8]))
    sk, sv = randn((B, H, S, Dk), gen), randn((B, H, S, Dv), gen)
    kw = dict(pos=3, modes=2, period=5.0)
    want_sk, want_sv = sk.clone(), sv.clone()
    want_o, _ = fsattn.bla_step(q, k, v, lg, (want_sk, want_sv), **kw)
    # a non-contiguous state_k (a transposed copy) and a float64 state_v: updated in place
    sk_nc = sk.transpose(2, 3).contiguous().transpose(2, 3)
    assert not sk_nc.is_contiguous()
    sv64 = sv.double()
    o, _ = fsattn.bla_step(q, k, v, lg, (sk_nc, sv64), **kw)
    assert torch.equal(o, want_o)
    assert torch.equal(sk_nc, want_sk)
    assert rel_err(sv64, want_sv) == 0


def test_interpolate(gen):
    B, H, S, D, M, W, position = 2, 2, 9, 3, 4, 9.0, 20
    state = randn((B, H, S, D), gen)
    lags = [0.0, 1.0, 2.5, -1.0, 8.0]
    out = fsattn.bla_interpolate(state, lags, modes=M, period=W, position=position)
    assert out.shape == (B, H, len(lags), D)
    want = torch.zeros(B, H, len(lags), D, dtype=torch.float64)
    a = torch.arange(S, dtype=torch.float64) * W / S
    for n, lag in enumerate(lags):
        x = a - (math.fmod(position, W) - lag)
        d = torch.ones(S, dtype=torch.float64)
        for m in range(1, M + 1):
            d = d + 2 * torch.cos(2 * math.pi * m * x / W)
        want[:, :, n] = torch.einsum("j,bhjd->bhd", d / S, state.double())
    assert rel_err(out, want) <= FWD_TOL
    # lags as a tensor give the same
    assert torch.equal(fsattn.bla_interpolate(state, torch.tensor(lags), modes=M, period=W, position=position), out)


def test_interpolate_reads_back_the_window(gen):
    # S >= 2M+1 and γ = 1: the window read back at lag ℓ is Σ_τ D_M(t-ℓ-τ)/W k_τ (docs/spec.md §2).
    B, T, H, D, M, W = 1, 10, 1, 3, 3, 16.0
    S = 2 * M + 1
    k = randn((B, T, H, D), gen)
    q = randn((B, T, H, D), gen)
    _, st = fsattn.bla(q, k, k, torch.zeros(H), modes=M, period=W, slots=S, output_final_state=True)
    out = fsattn.bla_interpolate(st[0], [0.0, 3.0], modes=M, period=W, position=T - 1)
    for n, lag in enumerate([0.0, 3.0]):
        want = sum(dirichlet_weights(1, M, W, int(round(T - 1 - lag - tau)))[0] * k[0, tau, 0].double() for tau in range(T))
        assert rel_err(out[0, 0, n], want) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes(dtype, gen):
    inputs, state, hyper = make_inputs(SHAPES[0], gen)
    xs = [leaf32(x.to(dtype)) for x in inputs[:3]] + [leaf32(inputs[3])]
    o, st = fsattn.bla(*xs, initial_state=state, output_final_state=True, **hyper)
    assert o.dtype == dtype and st[0].dtype == torch.float32
    o32, _ = fsattn.bla(*[x.detach().float() for x in xs], initial_state=state, output_final_state=True, **hyper)
    assert rel_err(o, o32) <= (1e-12 if dtype == torch.float64 else 1e-2)
    o.float().sum().backward()
    assert xs[0].grad.dtype == dtype and xs[3].grad.dtype == torch.float32


def test_non_contiguous_inputs(gen):
    inputs, state, hyper = make_inputs(SHAPES[0], gen)
    q, k, v, lg = inputs
    o, st = run_lib(inputs, state, hyper)
    # the same values through transposed views
    qn = q.transpose(0, 1).contiguous().transpose(0, 1)
    kn = k.transpose(2, 3).contiguous().transpose(2, 3)
    assert not qn.is_contiguous() and not kn.is_contiguous()
    sk = state[0].transpose(0, 1).contiguous().transpose(0, 1)
    o2, st2 = run_lib([qn, kn, v, lg], (sk, state[1]), hyper)
    assert torch.equal(o, o2) and torch.equal(st[0], st2[0])


def test_variants_agree(gen):
    inputs, state, hyper = make_inputs(SHAPES[0], gen)
    x64 = [x.double() for x in inputs]
    o_ref, _ = run_ref(x64, tuple(x.double() for x in state), hyper)
    names = [n for n in fsattn.variants("bla_forward") if not any(s in n for s in ("adams", "mullapudi", "li2018", "anderson2021"))]
    assert names
    try:
        for name in names:
            fsattn.set_variant("bla_forward", name)
            o, _ = run_lib(inputs, state, hyper)
            assert rel_err(o, o_ref) <= FWD_TOL, name
    finally:
        fsattn.set_variant("bla_forward", None)
