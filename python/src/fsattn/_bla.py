"""BLA, Blurry Window Attention (docs/spec.md §2): fsattn.bla, fsattn.bla_step and
fsattn.bla_interpolate, and the library calls under them with their fake implementations and
autograd glue (registered through fsattn._autograd).

States: (state_k [N, H, S, Dk], state_v [N, H, S, Dv]); N is B, or the number of sequences
with cu_seqlens.
"""

from typing import Optional, Sequence, Tuple, Union

import torch

from . import _ext
from ._autograd import _grad_or_none, _is_compiling, custom_op, differentiable, library_call
from ._common import (
    State,
    Tensor,
    _VARIANTS,
    _activations,
    _as_float,
    _cu_seqlens,
    _empty,
    _exec,
    _finish_step_state,
    _guard,
    _initial_state,
    _layout,
    _num_seqs,
    _param,
    _ptr,
    _ready,
    _restore_dtype,
    _step_activations,
    _step_shapes,
    _step_state,
)


# ---- library calls -----------------------------------------------------------------------


def _bla_fwd_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_gamma: Tensor,
    state_k: Optional[Tensor],
    state_v: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    modes: int,
    period: float,
    slots: int,
    scale: float,
    pos0: int,
    output_final_state: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    B, T, H, Dk = q.shape
    Dv = v.shape[3]
    N, cu = _num_seqs(B, cu_seqlens)
    o, sk, sv = _bla_fwd_outputs(q, v, N, slots, output_final_state)
    device, stream = _exec(q)
    with _guard(q):
        _ext.bla_forward(device, stream, _VARIANTS.get("bla_forward"), B, T, H, Dk, Dv, cu, N,
                         _layout(q, k, v, o, None, None, None, None),
                         modes, period, slots, scale, pos0, log_gamma.data_ptr(),
                         q.data_ptr(), k.data_ptr(), v.data_ptr(), _ptr(state_k), _ptr(state_v),
                         o.data_ptr(), _ptr(sk) if output_final_state else 0, _ptr(sv) if output_final_state else 0)
    return o, sk, sv


def _bla_fwd_outputs(q, v, N, slots, output_final_state):
    """o [B,T,H,Dv] and the final states [N,H,S,D] (empty when not wanted), unwritten."""
    B, T, H, Dk = q.shape
    Dv = v.shape[3]
    o = q.new_empty((B, T, H, Dv))
    if output_final_state:
        return o, q.new_empty((N, H, slots, Dk)), q.new_empty((N, H, slots, Dv))
    return o, q.new_empty(0), q.new_empty(0)


def _bla_fwd_fake(q, k, v, log_gamma, state_k, state_v, cu_seqlens, modes, period, slots, scale, pos0, output_final_state):
    N = q.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
    return _bla_fwd_outputs(q, v, N, slots, output_final_state)


def _bla_bwd_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_gamma: Tensor,
    state_k: Optional[Tensor],
    state_v: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    d_o: Tensor,
    d_state_k: Optional[Tensor],
    d_state_v: Optional[Tensor],
    modes: int,
    period: float,
    slots: int,
    scale: float,
    pos0: int,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    B, T, H, Dk = q.shape
    Dv = v.shape[3]
    N, cu = _num_seqs(B, cu_seqlens)
    dq, dk, dv, dlg = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), torch.empty_like(log_gamma)
    dsk, dsv = _empty(state_k, q), _empty(state_v, q)
    device, stream = _exec(q)
    with _guard(q):
        _ext.bla_backward(device, stream, _VARIANTS.get("bla_backward"), B, T, H, Dk, Dv, cu, N,
                          _layout(q, k, v, None, d_o, dq, dk, dv),
                          modes, period, slots, scale, pos0, log_gamma.data_ptr(),
                          q.data_ptr(), k.data_ptr(), v.data_ptr(), _ptr(state_k), _ptr(state_v),
                          d_o.data_ptr(), _ptr(d_state_k), _ptr(d_state_v),
                          dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), dlg.data_ptr(),
                          0 if state_k is None else dsk.data_ptr(), 0 if state_v is None else dsv.data_ptr())
    return dq, dk, dv, dlg, dsk, dsv


def _bla_bwd_fake(q, k, v, log_gamma, state_k, state_v, cu_seqlens, d_o, d_state_k, d_state_v, modes, period, slots, scale, pos0):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), torch.empty_like(log_gamma),
            _empty(state_k, q), _empty(state_v, q))


def _bla_step_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_gamma: Tensor,
    state_k: Tensor,
    state_v: Tensor,
    modes: int,
    period: float,
    scale: float,
    pos: int,
) -> Tensor:
    B, _, H, Dk = q.shape
    Dv = v.shape[3]
    o = torch.empty_like(v)  # [B, 1, H, Dv], v contiguous
    args = (_VARIANTS.get("bla_step"), B, H, Dk, Dv, modes, period, state_k.shape[2], scale, pos,
            log_gamma.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), state_k.data_ptr(), state_v.data_ptr(),
            o.data_ptr())
    if q.is_cuda:
        with _guard(q):
            _ext.bla_step(1, torch.cuda.current_stream(q.device).cuda_stream, *args)
    else:
        _ext.bla_step(0, 0, *args)
    return o


def _bla_step_fake(q, k, v, log_gamma, state_k, state_v, modes, period, scale, pos):
    return q.new_empty((q.shape[0], 1, q.shape[2], v.shape[3]))


# ---- autograd glue (setup_context/backward of the custom op and of the autograd.Function) ---


def _bla_setup_context(ctx, inputs, output):
    q, k, v, log_gamma, state_k, state_v, cu_seqlens, modes, period, slots, scale, pos0, output_final_state = inputs
    ctx.save_for_backward(q, k, v, log_gamma, state_k, state_v, cu_seqlens)
    ctx.hyper = (modes, period, slots, scale, pos0)
    ctx.output_final_state = output_final_state


def _bla_backward(ctx, d_o, d_state_k, d_state_v):
    q, k, v, log_gamma, state_k, state_v, cu_seqlens = ctx.saved_tensors
    d_o = q.new_zeros((*q.shape[:3], v.shape[3])) if d_o is None else d_o.float().contiguous()
    d_sk = _grad_or_none(d_state_k, ctx.output_final_state)
    d_sv = _grad_or_none(d_state_v, ctx.output_final_state)
    dq, dk, dv, dlg, dsk, dsv = _BLA_BWD(q, k, v, log_gamma, state_k, state_v, cu_seqlens, d_o, d_sk, d_sv, *ctx.hyper)
    return (dq, dk, dv, dlg, dsk if state_k is not None else None, dsv if state_v is not None else None,
            None, None, None, None, None, None, None)


_BLA_BWD = library_call("bla_bwd", _bla_bwd_impl, _bla_bwd_fake)
_BLA_FWD = differentiable("bla_fwd", _bla_fwd_impl, _bla_fwd_fake, _bla_setup_context, _bla_backward, "_BlaFunction")
_bla_step_op = custom_op("bla_step", _bla_step_impl, _bla_step_fake, ("state_k", "state_v"))


# ---- public functions --------------------------------------------------------------------


def bla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_gamma: Tensor,
    *,
    modes: int,
    period: float,
    slots: int,
    scale: Optional[float] = None,
    pos0: int = 0,
    initial_state: Optional[State] = None,
    output_final_state: bool = False,
    cu_seqlens: Optional[Union[Tensor, Sequence[int]]] = None,
) -> Tuple[Tensor, Optional[State]]:
    """Blurry Window Attention (docs/spec.md §2), differentiable.

    q, k [B, T, H, Dk]; v [B, T, H, Dv]; log_gamma [H] (each <= 0: the decay per head);
    modes M >= 0 Fourier modes, period W > 0 (tokens, any real), slots S >= 1; scale None:
    Dk^-1/2; pos0 the absolute position of the first token. initial_state / the returned
    final state: (state_k [N, H, S, Dk], state_v [N, H, S, Dv]). cu_seqlens (int32/int64,
    CPU or CUDA, or a list): B = 1 and N = len(cu_seqlens) - 1 sequences packed along T, each
    starting at position pos0 from its own state. Returns (o [B, T, H, Dv], final_state or
    None). Float16/bfloat16/float64 inputs are computed in float32 and o is returned in q's
    dtype; states are float32.
    """
    fn = "fsattn.bla"
    q, k, v, in_dtype, B, T, H, Dk, Dv = _activations(q, k, v, fn)
    device = q.device
    log_gamma = _param(log_gamma, "log_gamma", (H,), "[H]", device, fn)
    cu = _cu_seqlens(cu_seqlens, B, fn)
    N = B if cu is None else cu.shape[0] - 1
    slots = int(slots)
    sk0, sv0 = _initial_state(initial_state, ((N, H, slots, Dk), (N, H, slots, Dv)),
                              ("[N, H, S, Dk]", "[N, H, S, Dv]"), device, fn)
    if scale is not None and not float(scale) > 0:
        raise ValueError(f"{fn}: scale must be > 0 (or None for Dk^-1/2), got {scale}")
    o, sk, sv = _BLA_FWD(q, k, v, log_gamma, sk0, sv0, cu, int(modes), float(period), slots,
                         0.0 if scale is None else float(scale), int(pos0), bool(output_final_state))
    return _restore_dtype(o, in_dtype), ((sk, sv) if output_final_state else None)


def bla_step(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_gamma: Tensor,
    state: State,
    *,
    pos: int,
    modes: int,
    period: float,
    scale: Optional[float] = None,
) -> Tuple[Tensor, State]:
    """One BLA decode step at absolute position `pos`: q, k [B, 1, H, Dk], v [B, 1, H, Dv]
    (or [B, H, D]); state (state_k [B, H, S, Dk], state_v [B, H, S, Dv]) is updated in place
    (zeros to start). Returns (o [B, 1, H, Dv], state). Not differentiable."""
    if type(state) is tuple and len(state) == 2 and (scale is None or scale > 0) and not _is_compiling():
        sk, sv = state
        if _ready(q, (k, v, log_gamma, sk, sv)):
            dims = _step_shapes(q, k, v, sk, sv, ())
            if dims is not None and log_gamma.shape == (dims[1],):
                o = _bla_step_impl(q, k, v, log_gamma, sk, sv, int(modes), float(period),
                                   0.0 if scale is None else float(scale), int(pos))
                return o, state
    fn = "fsattn.bla_step"
    q, k, v, in_dtype, B, _, H, Dk, Dv, squeeze = _step_activations(q, k, v, fn)
    device = q.device
    log_gamma = _param(log_gamma, "log_gamma", (H,), "[H]", device, fn)
    if not isinstance(state, (tuple, list)) or len(state) != 2 or not isinstance(state[0], torch.Tensor) or state[0].dim() != 4:
        raise TypeError(f"{fn}: state must be a tuple (state_k [B, H, S, Dk], state_v [B, H, S, Dv])")
    S = state[0].shape[2]
    sk, sv, sk_orig, sv_orig = _step_state(state, ((B, H, S, Dk), (B, H, S, Dv)), ("[B, H, S, Dk]", "[B, H, S, Dv]"), device, fn)
    if scale is not None and not float(scale) > 0:
        raise ValueError(f"{fn}: scale must be > 0 (or None for Dk^-1/2), got {scale}")
    scale = 0.0 if scale is None else float(scale)
    if _bla_step_op is not None and _is_compiling():
        with torch.no_grad():
            o = _bla_step_op(q, k, v, log_gamma, sk, sv, int(modes), float(period), scale, int(pos))
    else:
        o = _bla_step_impl(q, k, v, log_gamma, sk, sv, int(modes), float(period), scale, int(pos))
    _finish_step_state(sk, sk_orig)
    _finish_step_state(sv, sv_orig)
    o = _restore_dtype(o, in_dtype)
    return (o.squeeze(1) if squeeze else o), tuple(state)


@torch.no_grad()
def bla_interpolate(
    state: Tensor,
    lags: Union[Tensor, Sequence[float]],
    *,
    modes: int,
    period: float,
    position: int,
) -> Tensor:
    """The blurry window of a BLA slot state (docs/spec.md §2): state [B, H, S, D] (one of a
    final state's two tensors), lags [N] (float, host or device); position: the absolute
    position of the newest token in the state (pos0 + T - 1 of the call that returned it).
    Returns [B, H, N, D] (float32, on the state's device). The library computes it on the
    CPU only, so a CUDA state is copied to the host and the result back. Not differentiable."""
    fn = "fsattn.bla_interpolate"
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"{fn}: state must be a torch.Tensor, got {type(state).__name__}")
    device = state.device
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"{fn}: state is on {device}: fsattn runs on the CPU and on CUDA devices")
    x = _as_float(state.detach().cpu(), "state", fn)
    if x.dim() != 4:
        raise ValueError(f"{fn}: state must be [B, H, S, D], got shape {list(x.shape)}")
    if not isinstance(lags, torch.Tensor):
        lags = torch.tensor(list(lags), dtype=torch.float64)
    if not lags.is_floating_point() and lags.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{fn}: lags must be a real tensor, got {lags.dtype}")
    lags = lags.detach().to(device="cpu", dtype=torch.float64).contiguous()
    if lags.dim() != 1 or lags.shape[0] < 1:
        raise ValueError(f"{fn}: lags must be 1-D with at least one entry, got shape {list(lags.shape)}")
    B, H, S, D = x.shape
    out = torch.empty((B, H, lags.shape[0], D), dtype=torch.float32)
    _ext.bla_interpolate(0, 0, _VARIANTS.get("bla_interpolate"), B, H, D, int(modes), float(period), S, int(position),
                         lags.data_ptr(), lags.shape[0], x.data_ptr(), out.data_ptr())
    return out.to(device) if device.type != "cpu" else out
