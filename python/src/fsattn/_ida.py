"""IDA, Interdomain Attention (docs/spec.md §1): fsattn.IdaParams, fsattn.ida and
fsattn.ida_step, and the library calls under them with their fake implementations and
autograd glue (registered through fsattn._autograd).

States: (state_k [N, H, M, Dk, 2], state_v [N, H, M, Dv, 2]), complex as a trailing (re, im)
pair; N is B, or the number of sequences with cu_seqlens.
"""

from typing import NamedTuple, Optional, Sequence, Tuple, Union

import torch

from . import _ext
from ._autograd import _grad_or_none, _is_compiling, custom_op, differentiable, library_call
from ._common import (
    State,
    Tensor,
    _VARIANTS,
    _activations,
    _as_float,
    _check_device,
    _check_shape,
    _cu_seqlens,
    _empty,
    _exec,
    _finish_step_state,
    _guard,
    _initial_state,
    _layout,
    _num_seqs,
    _ptr,
    _ready,
    _restore_dtype,
    _step_activations,
    _step_shapes,
    _step_state,
)


class IdaParams(NamedTuple):
    """IDA's per-head parameters (docs/spec.md §1); complex ones as real [..., 2] (or complex)."""

    gk: Tensor  # [H, Dk]
    bk: Tensor  # [H, Dk]
    gv: Tensor  # [H, Dv]
    bv: Tensor  # [H, Dv]
    log_dt: Tensor  # [H]
    A_re_log: Tensor  # [H, M]
    A_im: Tensor  # [H, M]
    B: Tensor  # [H, M, 2]
    C: Tensor  # [H, M, M, 2]


_IDA_PARAM_SHAPES = ("[H, Dk]", "[H, Dk]", "[H, Dv]", "[H, Dv]", "[H]", "[H, M]", "[H, M]", "[H, M, 2]", "[H, M, M, 2]")


# ---- library calls -----------------------------------------------------------------------


def _ida_fwd_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    gk: Tensor,
    bk: Tensor,
    gv: Tensor,
    bv: Tensor,
    log_dt: Tensor,
    A_re_log: Tensor,
    A_im: Tensor,
    B_: Tensor,
    C: Tensor,
    state_k: Optional[Tensor],
    state_v: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    eps: float,
    output_final_state: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    B, T, H, Dk = q.shape
    Dv = v.shape[3]
    M = A_re_log.shape[1]
    N, cu = _num_seqs(B, cu_seqlens)
    o, sk, sv = _ida_fwd_outputs(q, v, N, M, output_final_state)
    params = (gk.data_ptr(), bk.data_ptr(), gv.data_ptr(), bv.data_ptr(), log_dt.data_ptr(),
              A_re_log.data_ptr(), A_im.data_ptr(), B_.data_ptr(), C.data_ptr())
    device, stream = _exec(q)
    with _guard(q):
        _ext.ida_forward(device, stream, _VARIANTS.get("ida_forward"), B, T, H, Dk, Dv, cu, N,
                         _layout(q, k, v, o, None, None, None, None), M, eps, params,
                         q.data_ptr(), k.data_ptr(), v.data_ptr(), _ptr(state_k), _ptr(state_v),
                         o.data_ptr(), _ptr(sk) if output_final_state else 0, _ptr(sv) if output_final_state else 0)
    return o, sk, sv


def _ida_fwd_outputs(q, v, N, M, output_final_state):
    """o [B,T,H,Dv] and the final states [N,H,M,D,2] (empty when not wanted), unwritten."""
    B, T, H, Dk = q.shape
    Dv = v.shape[3]
    o = q.new_empty((B, T, H, Dv))
    if output_final_state:
        return o, q.new_empty((N, H, M, Dk, 2)), q.new_empty((N, H, M, Dv, 2))
    return o, q.new_empty(0), q.new_empty(0)


def _ida_fwd_fake(q, k, v, gk, bk, gv, bv, log_dt, A_re_log, A_im, B_, C, state_k, state_v, cu_seqlens, eps, output_final_state):
    N = q.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
    return _ida_fwd_outputs(q, v, N, A_re_log.shape[1], output_final_state)


def _ida_bwd_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    gk: Tensor,
    bk: Tensor,
    gv: Tensor,
    bv: Tensor,
    log_dt: Tensor,
    A_re_log: Tensor,
    A_im: Tensor,
    B_: Tensor,
    C: Tensor,
    state_k: Optional[Tensor],
    state_v: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    d_o: Tensor,
    d_state_k: Optional[Tensor],
    d_state_v: Optional[Tensor],
    eps: float,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    B, T, H, Dk = q.shape
    Dv = v.shape[3]
    M = A_re_log.shape[1]
    N, cu = _num_seqs(B, cu_seqlens)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    plist = (gk, bk, gv, bv, log_dt, A_re_log, A_im, B_, C)
    grads = tuple(torch.empty_like(p) for p in plist)
    dsk, dsv = _empty(state_k, q), _empty(state_v, q)
    device, stream = _exec(q)
    with _guard(q):
        _ext.ida_backward(device, stream, _VARIANTS.get("ida_backward"), B, T, H, Dk, Dv, cu, N,
                          _layout(q, k, v, None, d_o, dq, dk, dv), M, eps,
                          tuple(p.data_ptr() for p in plist),
                          q.data_ptr(), k.data_ptr(), v.data_ptr(), _ptr(state_k), _ptr(state_v),
                          d_o.data_ptr(), _ptr(d_state_k), _ptr(d_state_v),
                          dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), tuple(g.data_ptr() for g in grads),
                          0 if state_k is None else dsk.data_ptr(), 0 if state_v is None else dsv.data_ptr())
    return (dq, dk, dv) + grads + (dsk, dsv)


def _ida_bwd_fake(q, k, v, gk, bk, gv, bv, log_dt, A_re_log, A_im, B_, C, state_k, state_v, cu_seqlens, d_o, d_state_k, d_state_v, eps):
    plist = (gk, bk, gv, bv, log_dt, A_re_log, A_im, B_, C)
    return ((q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))
            + tuple(torch.empty_like(p) for p in plist) + (_empty(state_k, q), _empty(state_v, q)))


def _ida_step_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    gk: Tensor,
    bk: Tensor,
    gv: Tensor,
    bv: Tensor,
    log_dt: Tensor,
    A_re_log: Tensor,
    A_im: Tensor,
    B_: Tensor,
    C: Tensor,
    state_k: Tensor,
    state_v: Tensor,
    eps: float,
) -> Tensor:
    B, _, H, Dk = q.shape
    Dv = v.shape[3]
    o = torch.empty_like(v)  # [B, 1, H, Dv], v contiguous
    params = (gk.data_ptr(), bk.data_ptr(), gv.data_ptr(), bv.data_ptr(), log_dt.data_ptr(),
              A_re_log.data_ptr(), A_im.data_ptr(), B_.data_ptr(), C.data_ptr())
    args = (_VARIANTS.get("ida_step"), B, H, Dk, Dv, A_re_log.shape[1], eps, params,
            q.data_ptr(), k.data_ptr(), v.data_ptr(), state_k.data_ptr(), state_v.data_ptr(), o.data_ptr())
    if q.is_cuda:
        with _guard(q):
            _ext.ida_step(1, torch.cuda.current_stream(q.device).cuda_stream, *args)
    else:
        _ext.ida_step(0, 0, *args)
    return o


def _ida_step_fake(q, k, v, gk, bk, gv, bv, log_dt, A_re_log, A_im, B_, C, state_k, state_v, eps):
    return q.new_empty((q.shape[0], 1, q.shape[2], v.shape[3]))


# ---- autograd glue (setup_context/backward of the custom op and of the autograd.Function) ---


def _ida_setup_context(ctx, inputs, output):
    (q, k, v, gk, bk, gv, bv, log_dt, A_re_log, A_im, B_, C, state_k, state_v, cu_seqlens, eps, output_final_state) = inputs
    ctx.save_for_backward(q, k, v, gk, bk, gv, bv, log_dt, A_re_log, A_im, B_, C, state_k, state_v, cu_seqlens)
    ctx.eps = eps
    ctx.output_final_state = output_final_state


def _ida_backward(ctx, d_o, d_state_k, d_state_v):
    saved = ctx.saved_tensors
    q, v, state_k, state_v = saved[0], saved[2], saved[12], saved[13]
    d_o = q.new_zeros((*q.shape[:3], v.shape[3])) if d_o is None else d_o.float().contiguous()
    d_sk = _grad_or_none(d_state_k, ctx.output_final_state)
    d_sv = _grad_or_none(d_state_v, ctx.output_final_state)
    grads = _IDA_BWD(*saved, d_o, d_sk, d_sv, ctx.eps)
    dsk, dsv = grads[12], grads[13]
    return tuple(grads[:12]) + (dsk if state_k is not None else None, dsv if state_v is not None else None,
                                None, None, None)


_IDA_BWD = library_call("ida_bwd", _ida_bwd_impl, _ida_bwd_fake)
_IDA_FWD = differentiable("ida_fwd", _ida_fwd_impl, _ida_fwd_fake, _ida_setup_context, _ida_backward, "_IdaFunction")
_ida_step_op = custom_op("ida_step", _ida_step_impl, _ida_step_fake, ("state_k", "state_v"))


# ---- public functions --------------------------------------------------------------------


def ida(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    params: IdaParams,
    *,
    eps: Optional[float] = None,
    initial_state: Optional[State] = None,
    output_final_state: bool = False,
    cu_seqlens: Optional[Union[Tensor, Sequence[int]]] = None,
) -> Tuple[Tensor, Optional[State]]:
    """Interdomain Attention (docs/spec.md §1), differentiable (q, k, v, every parameter and
    the initial states).

    q, k [B, T, H, Dk]; v [B, T, H, Dv]; params an IdaParams (M = A_re_log.shape[1]); eps
    None: 1e-6. initial_state / the returned final state: (state_k [N, H, M, Dk, 2], state_v
    [N, H, M, Dv, 2]), complex as (re, im). cu_seqlens as in fsattn.bla. Returns
    (o [B, T, H, Dv], final_state or None).
    """
    fn = "fsattn.ida"
    q, k, v, in_dtype, B, T, H, Dk, Dv = _activations(q, k, v, fn)
    device = q.device
    p = _ida_params(params, H, Dk, Dv, device, fn)
    M = p[5].shape[1]
    cu = _cu_seqlens(cu_seqlens, B, fn)
    N = B if cu is None else cu.shape[0] - 1
    sk0, sv0 = _initial_state(initial_state, ((N, H, M, Dk, 2), (N, H, M, Dv, 2)),
                              ("[N, H, M, Dk, 2]", "[N, H, M, Dv, 2]"), device, fn)
    o, sk, sv = _IDA_FWD(q, k, v, *p, sk0, sv0, cu, _eps(eps, fn), bool(output_final_state))
    return _restore_dtype(o, in_dtype), ((sk, sv) if output_final_state else None)


def _eps(eps, fn: str) -> float:
    if eps is None:
        return 0.0
    eps = float(eps)
    if not eps > 0:
        raise ValueError(f"{fn}: eps must be > 0 (or None for 1e-6), got {eps}")
    return eps


def _ida_params(params, H: int, Dk: int, Dv: int, device, fn: str):
    if not isinstance(params, tuple) or len(params) != 9:
        raise TypeError(f"{fn}: params must be an fsattn.IdaParams(gk, bk, gv, bv, log_dt, A_re_log, A_im, B, C)")
    names = IdaParams._fields
    A_re_log = _as_float(params[5], "params.A_re_log", fn)
    if A_re_log.dim() != 2:
        raise ValueError(f"{fn}: params.A_re_log has shape {list(A_re_log.shape)}, expected [H, M]")
    M = A_re_log.shape[1]
    shapes = ((H, Dk), (H, Dk), (H, Dv), (H, Dv), (H,), (H, M), (H, M), (H, M, 2), (H, M, M, 2))
    out = []
    for i, (x, name, shape, layout) in enumerate(zip(params, names, shapes, _IDA_PARAM_SHAPES)):
        x = A_re_log if i == 5 else _as_float(x, "params." + name, fn)
        _check_device(x, "params." + name, device, fn)
        _check_shape(x, "params." + name, shape, layout, fn)
        out.append(x)
    return tuple(out)


def ida_step(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    params: IdaParams,
    state: State,
    *,
    eps: Optional[float] = None,
) -> Tuple[Tensor, State]:
    """One IDA decode step: q, k [B, 1, H, Dk], v [B, 1, H, Dv] (or [B, H, D]); state
    (state_k [B, H, M, Dk, 2], state_v [B, H, M, Dv, 2]) is updated in place (zeros to
    start). Returns (o [B, 1, H, Dv], state). Not differentiable."""
    if type(state) is tuple and len(state) == 2 and isinstance(params, tuple) and len(params) == 9 and (eps is None or eps > 0) and not _is_compiling():
        sk, sv = state
        if _ready(q, (k, v, sk, sv) + tuple(params)):
            dims = _step_shapes(q, k, v, sk, sv, (2,))
            if dims is not None:
                B, H, Dk, Dv, M = dims
                if (params[0].shape == (H, Dk) and params[1].shape == (H, Dk) and params[2].shape == (H, Dv)
                        and params[3].shape == (H, Dv) and params[4].shape == (H,) and params[5].shape == (H, M)
                        and params[6].shape == (H, M) and params[7].shape == (H, M, 2) and params[8].shape == (H, M, M, 2)):
                    o = _ida_step_impl(q, k, v, *params, sk, sv, 0.0 if eps is None else float(eps))
                    return o, state
    fn = "fsattn.ida_step"
    q, k, v, in_dtype, B, _, H, Dk, Dv, squeeze = _step_activations(q, k, v, fn)
    device = q.device
    p = _ida_params(params, H, Dk, Dv, device, fn)
    M = p[5].shape[1]
    sk, sv, sk_orig, sv_orig = _step_state(state, ((B, H, M, Dk, 2), (B, H, M, Dv, 2)),
                                           ("[B, H, M, Dk, 2]", "[B, H, M, Dv, 2]"), device, fn)
    eps = _eps(eps, fn)
    if _ida_step_op is not None and _is_compiling():
        with torch.no_grad():
            o = _ida_step_op(q, k, v, *p, sk, sv, eps)
    else:
        o = _ida_step_impl(q, k, v, *p, sk, sv, eps)
    _finish_step_state(sk, sk_orig)
    _finish_step_state(sv, sv_orig)
    o = _restore_dtype(o, in_dtype)
    return (o.squeeze(1) if squeeze else o), tuple(state)
