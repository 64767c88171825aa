"""fsattn.ida and ida_step against the float64 reference (docs/spec.md §1, §4)."""

import pytest
import torch

import fsattn
from fsattn_reference import assert_grads_close, grads, ida_init, ida_reference, leaf32, leaf64, loss_of, randn, rel_err

FWD_TOL = 1e-5  # docs/spec.md §4
GRAD_TOL = 1e-4
NAMES = ["q", "k", "v"] + list(fsattn.IdaParams._fields) + ["state_k", "state_v"]

# B, T, H, Dk, Dv, M. (Not Dk or Dv = 1: a 1-element feature normalised by rms() is ±1, its
# gradient only eps-sized rounding noise, which no relative tolerance can judge.)
SHAPES = [
    (2, 13, 2, 5, 3, 4),
    (1, 9, 3, 4, 6, 1),
    (3, 1, 1, 2, 3, 3),
    (1, 29, 2, 8, 8, 8),
]


def make_inputs(shape, gen, with_state=True):
    B, T, H, Dk, Dv, M = shape
    q, k = randn((B, T, H, Dk), gen), randn((B, T, H, Dk), gen)
    v = randn((B, T, H, Dv), gen)
    params = ida_init(H, Dk, Dv, M, gen)
    state = (randn((B, H, M, Dk, 2), gen, 0.3), randn((B, H, M, Dv, 2), gen, 0.3)) if with_state else None
    return [q, k, v], params, state


def lib(xs, ps, state, **kw):
    return fsattn.ida(*xs, fsattn.IdaParams(*ps), initial_state=state, output_final_state=True, **kw)


def check_against_reference(shape, gen, with_state, use_o=True, use_state=True, eps=None):
    xs, ps, state = make_inputs(shape, gen, with_state)
    B, T, H, Dk, Dv, M = shape
    d_o = randn((B, T, H, Dv), gen) if use_o else None
    d_state = (randn((B, H, M, Dk, 2), gen), randn((B, H, M, Dv, 2), gen)) if use_state else None

    leaves32 = [leaf32(x) for x in xs + ps + (list(state) if with_state else [])]
    o, st = lib(leaves32[:3], leaves32[3:12], tuple(leaves32[12:]) if with_state else None, eps=eps)
    leaves64 = [leaf64(x) for x in xs + ps + (list(state) if with_state else [])]
    o_ref, st_ref = ida_reference(*leaves64[:3], leaves64[3:12], eps=eps,
                                  initial_state=tuple(leaves64[12:]) if with_state else None)

    assert o.dtype == torch.float32 and o.shape == (B, T, H, Dv)
    assert st[0].shape == (B, H, M, Dk, 2) and st[1].shape == (B, H, M, Dv, 2)
    assert rel_err(o, o_ref) <= FWD_TOL
    assert rel_err(st[0], st_ref[0]) <= FWD_TOL and rel_err(st[1], st_ref[1]) <= FWD_TOL

    g = grads(loss_of(o, st, d_o, d_state), leaves32)
    g_ref = grads(loss_of(o_ref, st_ref, d_o, d_state), leaves64)
    assert_grads_close(g, g_ref, NAMES, GRAD_TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_state", [False, True])
def test_forward_and_gradients(shape, with_state, gen):
    check_against_reference(shape, gen, with_state)


def test_gradients_of_o_only_and_of_state_only(gen):
    check_against_reference(SHAPES[0], gen, True, use_o=True, use_state=False)
    check_against_reference(SHAPES[0], gen, True, use_o=False, use_state=True)


def test_explicit_eps(gen):
    check_against_reference(SHAPES[0], gen, True, eps=1e-3)


def test_complex_parameters_and_states(gen):
    xs, ps, state = make_inputs(SHAPES[0], gen)
    o, st = lib(xs, ps, state)
    cps = list(ps)
    cps[7] = torch.view_as_complex(ps[7])
    cps[8] = torch.view_as_complex(ps[8])
    cstate = tuple(torch.view_as_complex(s) for s in state)
    o2, st2 = lib(xs, cps, cstate)
    assert torch.equal(o, o2) and torch.equal(st[0], st2[0])


def test_varlen_equals_separate_calls(gen):
    H, Dk, Dv, M = 2, 4, 3, 3
    lengths = [5, 0, 8, 1]
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    T, N = cu[-1], len(lengths)
    xs = [randn((1, T, H, Dk), gen), randn((1, T, H, Dk), gen), randn((1, T, H, Dv), gen)]
    ps = ida_init(H, Dk, Dv, M, gen)
    s0 = [randn((N, H, M, Dk, 2), gen, 0.3), randn((N, H, M, Dv, 2), gen, 0.3)]
    d_o, dsk, dsv = randn((1, T, H, Dv), gen), randn((N, H, M, Dk, 2), gen), randn((N, H, M, Dv, 2), gen)

    leaves = [leaf32(x) for x in xs + ps + s0]
    o, st = fsattn.ida(*leaves[:3], fsattn.IdaParams(*leaves[3:12]), initial_state=tuple(leaves[12:]),
                       output_final_state=True, cu_seqlens=torch.tensor(cu, dtype=torch.int32))
    g = grads(loss_of(o, st, d_o, (dsk, dsv)), leaves)

    g_sep = [torch.zeros_like(x) for x in xs + ps + s0]
    for s in range(N):
        a, b = cu[s], cu[s + 1]
        if a == b:
            assert torch.equal(st[0][s], s0[0][s]) and torch.equal(st[1][s], s0[1][s])
            g_sep[12][s], g_sep[13][s] = dsk[s], dsv[s]
            continue
        ls = [leaf32(x[:, a:b]) for x in xs] + [leaf32(p) for p in ps] + [leaf32(x[s:s + 1]) for x in s0]
        o_s, st_s = fsattn.ida(*ls[:3], fsattn.IdaParams(*ls[3:12]), initial_state=tuple(ls[12:]), output_final_state=True)
        assert rel_err(o[:, a:b], o_s) <= FWD_TOL
        assert rel_err(st[0][s:s + 1], st_s[0]) <= FWD_TOL and rel_err(st[1][s:s + 1], st_s[1]) <= FWD_TOL
        gs = grads(loss_of(o_s, st_s, d_o[:, a:b], (dsk[s:s + 1], dsv[s:s + 1])), ls)
        for i in range(3):
            g_sep[i][:, a:b] = gs[i]
        for i in range(3, 12):
            g_sep[i] += gs[i]
        g_sep[12][s], g_sep[13][s] = gs[12][0], gs[13][0]
    for name, a, b in zip(NAMES, g, g_sep):
        assert rel_err(a, b) <= GRAD_TOL, name


def test_state_chaining(gen):
    shape = (2, 15, 2, 5, 4, 4)
    B, T, H, Dk, Dv, M = shape
    xs, ps, state = make_inputs(shape, gen)
    d_o = randn((B, T, H, Dv), gen)
    d_state = (randn((B, H, M, Dk, 2), gen), randn((B, H, M, Dv, 2), gen))

    l1 = [leaf32(x) for x in xs + ps + list(state)]
    o, st = lib(l1[:3], l1[3:12], tuple(l1[12:]))
    g1 = grads(loss_of(o, st, d_o, d_state), l1)

    T1 = 8
    l2 = [leaf32(x) for x in xs + ps + list(state)]
    q, k, v = l2[:3]
    oa, sa = lib([q[:, :T1], k[:, :T1], v[:, :T1]], l2[3:12], tuple(l2[12:]))
    ob, sb = lib([q[:, T1:], k[:, T1:], v[:, T1:]], l2[3:12], sa)
    o2 = torch.cat([oa, ob], 1)
    assert rel_err(o2, o) <= FWD_TOL
    assert rel_err(sb[0], st[0]) <= FWD_TOL and rel_err(sb[1], st[1]) <= FWD_TOL
    g2 = grads(loss_of(o2, sb, d_o, d_state), l2)
    for name, a, b in zip(NAMES, g2, g1):
        assert rel_err(a, b) <= GRAD_TOL, name


@pytest.mark.parametrize("with_state", [False, True])
def test_steps_equal_forward(with_state, gen):
    shape = (2, 11, 3, 5, 4, 4)
    B, T, H, Dk, Dv, M = shape
    xs, ps, state = make_inputs(shape, gen, with_state)
    q, k, v = xs
    params = fsattn.IdaParams(*ps)
    o, st = lib(xs, ps, state)
    sk = state[0].clone() if with_state else torch.zeros(B, H, M, Dk, 2)
    sv = state[1].clone() if with_state else torch.zeros(B, H, M, Dv, 2)
    outs = []
    for t in range(T):
        o_t, _ = fsattn.ida_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], params, (sk, sv))
        outs.append(o_t)
    assert rel_err(torch.cat(outs, 1), o) <= FWD_TOL
    assert rel_err(sk, st[0]) <= FWD_TOL and rel_err(sv, st[1]) <= FWD_TOL


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_other_float_dtypes(dtype, gen):
    xs, ps, state = make_inputs(SHAPES[0], gen)
    xd = [leaf32(x.to(dtype)) for x in xs]
    pd = [leaf32(p.to(dtype)) for p in ps]
    o, st = lib(xd, pd, state)
    assert o.dtype == dtype and st[0].dtype == torch.float32
    o32, _ = lib([x.detach().float() for x in xd], [p.detach().float() for p in pd], state)
    assert rel_err(o, o32) <= (1e-12 if dtype == torch.float64 else 1e-2)
    o.float().sum().backward()
    assert xd[0].grad.dtype == dtype and pd[8].grad.dtype == dtype


def test_variants_agree(gen):
    xs, ps, state = make_inputs(SHAPES[0], gen)
    o_ref, _ = ida_reference(*[x.double() for x in xs], [p.double() for p in ps],
                             initial_state=tuple(s.double() for s in state))
    names = [n for n in fsattn.variants("ida_forward") if not any(s in n for s in ("adams", "mullapudi", "li2018", "anderson2021"))]
    assert names
    try:
        for name in names:
            fsattn.set_variant("ida_forward", name)
            o, _ = lib(xs, ps, state)
            assert rel_err(o, o_ref) <= FWD_TOL, name
    finally:
        fsattn.set_variant("ida_forward", None)
