"""Argument checking and tensor plumbing shared by the BLA and IDA functions, and the schedule
variant each library call runs (set_variant).

The public functions check types, shapes and devices with these helpers and raise TypeError /
ValueError naming the argument; values (sizes, cu_seqlens, log_gamma, period, ...) are
validated by the library, whose errors are raised as ValueError (invalid argument) or
fsattn.FsattnError (a RuntimeError). The library computes in float32: other floating-point
dtypes are converted (_as_float), and o is returned in q's dtype (_restore_dtype). The passes
read float32 q, k and v where they lie, through their strides (slices of a fused projection,
head-major views); other tensors, and activations it cannot stride over, are made contiguous.
"""

import contextlib
from typing import Optional, Tuple

import torch

Tensor = torch.Tensor
State = Tuple[Tensor, Tensor]

# exec.variant per op name ("bla_forward", ...); absent: the tuning table's choice.
_VARIANTS = {}


def set_variant(op: str, name: Optional[str] = None) -> None:
    """Run op ("bla_forward", "bla_backward", "bla_step", "bla_interpolate", "ida_forward",
    "ida_backward", "ida_step") with the compiled schedule variant `name` (see
    fsattn.variants); None restores the tuning table's choice."""
    if op not in ("bla_forward", "bla_backward", "bla_step", "bla_interpolate", "ida_forward", "ida_backward", "ida_step"):
        raise ValueError(f"fsattn.set_variant: unknown op {op!r}")
    if name is None:
        _VARIANTS.pop(op, None)
    else:
        _VARIANTS[op] = str(name)


# ---- tensor plumbing and argument checks ------------------------------------------------


def _ptr(t: Optional[Tensor]) -> int:
    return 0 if t is None else t.data_ptr()


def _exec(t: Tensor) -> Tuple[int, int]:
    """(device, stream) of the C call for tensors on t's device."""
    if t.is_cuda:
        return 1, torch.cuda.current_stream(t.device).cuda_stream
    return 0, 0


def _guard(t: Tensor):
    """Makes t's CUDA device current (the library runs in the calling thread's current context)."""
    if t.is_cuda and t.device.index is not None and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device.index)
    return contextlib.nullcontext()


def _empty(t: Optional[Tensor], like: Tensor) -> Tensor:
    return torch.empty_like(t) if t is not None else like.new_empty(0)


def _num_seqs(batch: int, cu_seqlens: Optional[Tensor]) -> Tuple[int, int]:
    if cu_seqlens is None:
        return batch, 0
    return cu_seqlens.shape[0] - 1, cu_seqlens.data_ptr()


def _keeps_strides(x: Tensor) -> bool:
    """Whether the library reads x [B, T, H, D] where it lies (docs/spec.md, "Strides"): float32,
    the channel contiguous, the other strides positive and, for tokens and heads, within 2^31."""
    if x.dtype is not torch.float32 or x.dim() != 4:
        return False
    (B, T, H, D), (sb, st, sh, sd) = x.shape, x.stride()
    if D > 1 and sd != 1:
        return False
    return all(n == 1 or 0 < s for n, s in ((B, sb), (T, st), (H, sh))) and all(
        n == 1 or s < 2**31 for n, s in ((T, st), (H, sh)))


def _layout(*tensors) -> list:
    """The element strides (batch, token, head) of q, k, v, o, d_o, dq, dk, dv (None: absent)
    as fsattn_layout takes them: zeros for a contiguous tensor and for a dimension of extent 1."""
    out = []
    for x in tensors:
        if x is None or x.is_contiguous():
            out += [0, 0, 0]
        else:
            out += [s if n > 1 else 0 for n, s in zip(x.shape[:3], x.stride()[:3])]
    return out


def _as_float(x, name: str, fn: str, allow_complex: bool = True, keep_strides: bool = False) -> Tensor:
    """x as a contiguous float32 tensor (complex tensors as their real [..., 2] view), or with
    keep_strides an activation the library can read as it lies (_keeps_strides), uncopied."""
    if keep_strides and isinstance(x, torch.Tensor) and _keeps_strides(x):
        return x
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype is not torch.float32:
        if x.is_complex() and allow_complex:
            x = torch.view_as_real(x)
        if not x.is_floating_point():
            raise TypeError(
                f"{fn}: {name} must be a floating-point tensor (float32; float16, bfloat16 and float64 "
                f"are converted to float32), got {x.dtype}"
            )
        x = x.float()
    if not x.is_contiguous():
        x = x.contiguous()
    return x


def _check_device(x: Tensor, name: str, device: torch.device, fn: str) -> None:
    if x.device != device:
        raise ValueError(f"{fn}: {name} is on {x.device}, but q is on {device}: every tensor must be on q's device")


def _check_shape(x: Tensor, name: str, shape: Tuple[int, ...], layout: str, fn: str) -> None:
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{fn}: {name} has shape {list(x.shape)}, expected {list(shape)} ({layout})")


def _check_q_device(q: Tensor, fn: str) -> torch.device:
    if q.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{fn}: q is on {q.device}: fsattn runs on the CPU and on CUDA devices")
    return q.device


def _activations(q, k, v, fn: str, step: bool = False):
    """Checks and converts q, k, v; returns (q, k, v, in_dtype, B, T, H, Dk, Dv)."""
    in_dtype = q.dtype if isinstance(q, torch.Tensor) else None
    q = _as_float(q, "q", fn, False, keep_strides=not step)
    k = _as_float(k, "k", fn, False, keep_strides=not step)
    v = _as_float(v, "v", fn, False, keep_strides=not step)
    device = _check_q_device(q, fn)
    layout = "[B, 1, H, Dk]" if step else "[B, T, H, Dk]"
    if q.dim() != 4:
        raise ValueError(f"{fn}: q must be {layout}, got shape {list(q.shape)}")
    B, T, H, Dk = q.shape
    if step and T != 1:
        raise ValueError(f"{fn}: q has shape {list(q.shape)}: a step takes one token per sequence ({layout})")
    _check_device(k, "k", device, fn)
    _check_device(v, "v", device, fn)
    _check_shape(k, "k", (B, T, H, Dk), layout, fn)
    if v.dim() != 4 or tuple(v.shape[:3]) != (B, T, H):
        raise ValueError(f"{fn}: v has shape {list(v.shape)}, expected [{B}, {T}, {H}, Dv] (q's B, T, H)")
    return q, k, v, in_dtype, B, T, H, Dk, v.shape[3]


def _cu_seqlens(cu_seqlens, batch: int, fn: str) -> Optional[Tensor]:
    """cu_seqlens as a contiguous host int64 tensor (or None)."""
    if cu_seqlens is None:
        return None
    if not isinstance(cu_seqlens, torch.Tensor):
        cu_seqlens = torch.tensor(list(cu_seqlens), dtype=torch.int64)
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{fn}: cu_seqlens must be an int32 or int64 tensor, got {cu_seqlens.dtype}")
    if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 2:
        raise ValueError(f"{fn}: cu_seqlens must be 1-D with num_seqs + 1 >= 2 entries, got shape {list(cu_seqlens.shape)}")
    if batch != 1:
        raise ValueError(f"{fn}: with cu_seqlens the batch must be 1 (sequences concatenated along T), got B = {batch}")
    return cu_seqlens.to(device="cpu", dtype=torch.int64).contiguous()


def _initial_state(state, shapes, layouts, device, fn: str):
    if state is None:
        return None, None
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise TypeError(f"{fn}: initial_state must be a tuple (state_k, state_v) or None")
    out = []
    for x, name, shape, layout in zip(state, ("initial_state[0] (state_k)", "initial_state[1] (state_v)"), shapes, layouts):
        x = _as_float(x, name, fn)
        _check_device(x, name, device, fn)
        _check_shape(x, name, shape, layout, fn)
        out.append(x)
    return out[0], out[1]


def _step_state(state, shapes, layouts, device, fn: str):
    """The step's states, updated in place: returns (work_k, work_v, orig_k, orig_v); a work
    tensor differs from its original when that is not contiguous float32, and is copied back."""
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise TypeError(f"{fn}: state must be a tuple (state_k, state_v) of tensors, updated in place")
    work = []
    for x, name, shape, layout in zip(state, ("state[0] (state_k)", "state[1] (state_v)"), shapes, layouts):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(x).__name__}")
        if x.is_complex():
            raise TypeError(f"{fn}: {name} must be a real float tensor (complex values as a trailing (re, im) pair)")
        _check_device(x, name, device, fn)
        _check_shape(x, name, shape, layout, fn)
        w = x if (x.dtype is torch.float32 and x.is_contiguous()) else _as_float(x.detach(), name, fn)
        work.append(w)
    return work[0], work[1], state[0], state[1]


def _finish_step_state(work: Tensor, orig: Tensor) -> None:
    if work is not orig:
        with torch.no_grad():
            orig.copy_(work)


def _restore_dtype(o: Tensor, in_dtype) -> Tensor:
    if in_dtype is not None and in_dtype is not torch.float32 and in_dtype.is_floating_point:
        return o.to(in_dtype)
    return o


def _param(x, name: str, shape, layout: str, device, fn: str) -> Tensor:
    x = _as_float(x, name, fn)
    _check_device(x, name, device, fn)
    _check_shape(x, name, shape, layout, fn)
    return x


# ---- the decode steps: fast path and arguments --------------------------------------------


_F32 = torch.float32


def _ready(q, others) -> bool:
    """True when q and every tensor of `others` are contiguous float32 tensors on q's CPU or
    CUDA device: the steps' fast path, which then only compares shapes (a decode step's
    overhead is what these checks cost; anything else goes through the checking path)."""
    if not isinstance(q, Tensor) or q.dtype is not _F32 or not q.is_contiguous() or not (q.is_cpu or q.is_cuda):
        return False
    device = q.device
    for t in others:
        if not isinstance(t, Tensor) or t.dtype is not _F32 or not t.is_contiguous() or t.device != device:
            return False
    return True


def _step_shapes(q, k, v, sk, sv, trailing):
    """(B, H, Dk, Dv, F) when q, k [B,1,H,Dk], v [B,1,H,Dv], sk [B,H,F,Dk,*trailing] and
    sv [B,H,F,Dv,*trailing] (F: S or M); else None."""
    qs = q.shape
    if len(qs) != 4 or qs[1] != 1 or k.shape != qs:
        return None
    B, _, H, Dk = qs
    vs = v.shape
    if len(vs) != 4 or vs[:3] != qs[:3]:
        return None
    Dv = vs[3]
    ks = sk.shape
    if len(ks) != 4 + len(trailing):
        return None
    F = ks[2]
    if ks != (B, H, F, Dk) + trailing or sv.shape != (B, H, F, Dv) + trailing:
        return None
    return B, H, Dk, Dv, F


def _step_activations(q, k, v, fn: str):
    """q, k, v of a step: [B, 1, H, D] (or [B, H, D], returned as [B, 1, H, D])."""
    squeeze = isinstance(q, torch.Tensor) and q.dim() == 3
    if squeeze:
        if not (isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor) and k.dim() == 3 and v.dim() == 3):
            raise ValueError(f"{fn}: q is [B, H, Dk]; k and v must be [B, H, D] too")
        q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
    return _activations(q, k, v, fn, step=True) + (squeeze,)
