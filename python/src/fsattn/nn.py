"""Token-mixer layers over fsattn.bla and fsattn.ida.

Each layer projects x [B, T, d_model] to q, k, v ([B, T, H, head_dim]), runs the mixer and
projects the heads back to d_model:

    y, state = layer(x)                      # the chunked pass (training, prefill)
    y_t, state = layer.step(x_t, state)      # one token per sequence (decoding)

`state` carries what the next call needs (the mixer's fixed-size state and, for BLA, the
position of the next token). prefill_then_decode() runs a prompt through the chunked pass
and the rest token by token; its result equals layer(x)[0] up to float32 rounding.

Not included (as in the paper's model, these are the host model's): short convolutions, RoPE
and output gates (docs/spec.md §1).
"""

import math
from typing import NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from . import ops

Tensor = torch.Tensor

__all__ = ["BLA", "IDA", "BLAState", "IDAState", "prefill_then_decode", "ida_reference_init"]


class BLAState(NamedTuple):
    k: Tensor  # [N, H, S, Dk]
    v: Tensor  # [N, H, S, Dv]
    pos: Union[int, Tuple[int, ...]]  # absolute position of each sequence's next token


class IDAState(NamedTuple):
    k: Tensor  # [N, H, M, Dk, 2]
    v: Tensor  # [N, H, M, Dv, 2]


def _lengths(cu_seqlens) -> Tuple[int, ...]:
    cu = cu_seqlens.tolist() if isinstance(cu_seqlens, torch.Tensor) else list(cu_seqlens)
    return tuple(int(b) - int(a) for a, b in zip(cu[:-1], cu[1:]))


class _Mixer(torch.nn.Module):
    def __init__(self, d_model: int, num_heads: int, head_dim: int, bias: bool, device, dtype):
        super().__init__()
        if d_model < 1 or num_heads < 1 or head_dim < 1:
            raise ValueError("d_model, num_heads and head_dim must be >= 1")
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, head_dim
        kw = dict(device=device, dtype=dtype)
        inner = num_heads * head_dim
        self.q_proj = torch.nn.Linear(d_model, inner, bias=bias, **kw)
        self.k_proj = torch.nn.Linear(d_model, inner, bias=bias, **kw)
        self.v_proj = torch.nn.Linear(d_model, inner, bias=bias, **kw)
        self.o_proj = torch.nn.Linear(inner, d_model, bias=bias, **kw)

    def _qkv(self, x: Tensor):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be [B, T, d_model={self.d_model}], got shape {list(x.shape)}")
        B, T, _ = x.shape
        shape = (B, T, self.num_heads, self.head_dim)
        return self.q_proj(x).view(shape), self.k_proj(x).view(shape), self.v_proj(x).view(shape)

    def _out(self, o: Tensor) -> Tensor:
        B, T = o.shape[:2]
        return self.o_proj(o.reshape(B, T, self.num_heads * self.head_dim))

    @staticmethod
    def _token(x_t: Tensor) -> Tuple[Tensor, bool]:
        if x_t.dim() == 2:
            return x_t.unsqueeze(1), True
        if x_t.dim() == 3 and x_t.shape[1] == 1:
            return x_t, False
        raise ValueError(f"x_t must be [B, d_model] or [B, 1, d_model], got shape {list(x_t.shape)}")


class BLA(_Mixer):
    """Blurry Window Attention layer (docs/spec.md §2).

    slots S (the state holds S·2·head_dim floats per head), modes M (default (S-1)//2, so that
    the S slots sample the 2M+1 Fourier modes exactly), period W in tokens. Each head's decay
    is γ_h = sigmoid(decay_h) (log_gamma = logsigmoid(decay), always < 0), initialised so the
    heads' memories 1/(1-γ) range over 2^3 .. 2^9 tokens.
    """

    def __init__(self, d_model: int, num_heads: int, head_dim: int, slots: int = 64, modes: Optional[int] = None,
                 period: float = 256.0, *, bias: bool = False, device=None, dtype=None):
        super().__init__(d_model, num_heads, head_dim, bias, device, dtype)
        self.slots = int(slots)
        self.modes = (self.slots - 1) // 2 if modes is None else int(modes)
        self.period = float(period)
        memory = torch.logspace(3, 9, num_heads, base=2.0, dtype=torch.float64) if num_heads > 1 else torch.tensor([32.0], dtype=torch.float64)
        gamma = 1.0 - 1.0 / memory
        self.decay = torch.nn.Parameter(torch.log(gamma / (1 - gamma)).to(device=device, dtype=torch.float32))

    @property
    def log_gamma(self) -> Tensor:
        return F.logsigmoid(self.decay)

    def init_state(self, batch_size: int, device=None, pos: int = 0) -> BLAState:
        """A zero state for batch_size sequences, the next token at position pos."""
        device = self.decay.device if device is None else device
        H, D, S = self.num_heads, self.head_dim, self.slots
        return BLAState(torch.zeros(batch_size, H, S, D, device=device), torch.zeros(batch_size, H, S, D, device=device), pos)

    def forward(self, x: Tensor, state: Optional[BLAState] = None, cu_seqlens=None, output_state: bool = True):
        """x [B, T, d_model] (with cu_seqlens: B = 1, sequences packed along T). Returns
        (y [B, T, d_model], BLAState or None). A state's pos must be one int here."""
        q, k, v = self._qkv(x)
        pos0, initial = 0, None
        if state is not None:
            if not isinstance(state.pos, int):
                if len(set(state.pos)) != 1:
                    raise ValueError("BLA.forward: the sequences of the state are at different positions "
                                     f"{state.pos}; continue them with step() or one by one")
                pos0 = int(state.pos[0])
            else:
                pos0 = state.pos
            initial = (state.k, state.v)
        o, final = ops.bla(q, k, v, self.log_gamma, modes=self.modes, period=self.period, slots=self.slots,
                           pos0=pos0, initial_state=initial, output_final_state=output_state, cu_seqlens=cu_seqlens)
        y = self._out(o)
        if not output_state:
            return y, None
        pos = pos0 + x.shape[1] if cu_seqlens is None else tuple(pos0 + n for n in _lengths(cu_seqlens))
        return y, BLAState(final[0], final[1], pos)

    @torch.no_grad()
    def step(self, x_t: Tensor, state: Optional[BLAState] = None, pos: Optional[Union[int, Sequence[int]]] = None):
        """Decodes one token per sequence: x_t [B, d_model] or [B, 1, d_model]. The state's
        tensors are updated in place; pos (default state.pos, an int or one per sequence) is
        the token's absolute position. Returns (y_t shaped like x_t, the state advanced by one).
        Inference only (no gradient)."""
        x, squeeze = self._token(x_t)
        B = x.shape[0]
        if state is None:
            state = self.init_state(B, x.device)
        pos = state.pos if pos is None else pos
        q, k, v = self._qkv(x)
        lg = self.log_gamma
        kw = dict(modes=self.modes, period=self.period)
        if isinstance(pos, int) or (isinstance(pos, (tuple, list)) and len(set(pos)) == 1):
            p = pos if isinstance(pos, int) else int(pos[0])
            o, _ = ops.bla_step(q, k, v, lg, (state.k, state.v), pos=p, **kw)
            new_pos = p + 1 if isinstance(pos, int) else tuple(int(t) + 1 for t in pos)
        else:
            # Sequences at different positions: one step call per distinct position.
            pos = [int(t) for t in pos]
            if len(pos) != B:
                raise ValueError(f"BLA.step: {len(pos)} positions for a batch of {B}")
            o = q.new_empty((B, 1, self.num_heads, self.head_dim))
            for p in sorted(set(pos)):
                idx = torch.tensor([i for i, t in enumerate(pos) if t == p], device=x.device)
                sk, sv = state.k.index_select(0, idx), state.v.index_select(0, idx)
                o_p, _ = ops.bla_step(q.index_select(0, idx), k.index_select(0, idx), v.index_select(0, idx), lg,
                                      (sk, sv), pos=p, **kw)
                state.k.index_copy_(0, idx, sk)
                state.v.index_copy_(0, idx, sv)
                o.index_copy_(0, idx, o_p.to(o.dtype))
            new_pos = tuple(t + 1 for t in pos)
        y = self._out(o)
        return (y.squeeze(1) if squeeze else y), BLAState(state.k, state.v, new_pos)


def ida_reference_init(num_heads: int, head_dim: int, modes: int, generator: Optional[torch.Generator] = None,
                       dv: Optional[int] = None) -> ops.IdaParams:
    """IDA's reference initialisation (docs/spec.md §1, S4D-Inv): A_re_log = log(1/2),
    A_im[n] = (M/π)(M/(2n+1) − 1), log_dt ~ U[log 1e-3, log 1e-1], B = 1, C complex normal
    of variance 1/M, gk = gv = 1, bk = bv = 0. float32 CPU tensors."""
    H, Dk, M = num_heads, head_dim, modes
    Dv = head_dim if dv is None else dv
    n = torch.arange(M, dtype=torch.float64)
    A_im = (M / math.pi) * (M / (2 * n + 1) - 1)
    log_dt = torch.empty(H, dtype=torch.float64).uniform_(math.log(1e-3), math.log(1e-1), generator=generator)
    B = torch.zeros(H, M, 2)
    B[..., 0] = 1.0
    C = torch.randn(H, M, M, 2, generator=generator, dtype=torch.float64) * math.sqrt(1.0 / (2 * M))
    return ops.IdaParams(
        gk=torch.ones(H, Dk), bk=torch.zeros(H, Dk), gv=torch.ones(H, Dv), bv=torch.zeros(H, Dv),
        log_dt=log_dt.float(), A_re_log=torch.full((H, M), math.log(0.5)), A_im=A_im.repeat(H, 1).float(),
        B=B, C=C.float())


class IDA(_Mixer):
    """Interdomain Attention layer (docs/spec.md §1): M complex S4D modes per head (the state
    holds 2·M·2·head_dim floats per head), parameters named as in the spec and initialised as
    its reference initialisation (S4D-Inv; see ida_reference_init)."""

    def __init__(self, d_model: int, num_heads: int, head_dim: int, modes: int = 64, *, eps: Optional[float] = None,
                 bias: bool = False, device=None, dtype=None):
        super().__init__(d_model, num_heads, head_dim, bias, device, dtype)
        self.modes = int(modes)
        self.eps = eps
        init = ida_reference_init(num_heads, head_dim, self.modes)
        for name, value in init._asdict().items():
            self.register_parameter(name, torch.nn.Parameter(value.to(device=device)))

    @property
    def params(self) -> ops.IdaParams:
        return ops.IdaParams(self.gk, self.bk, self.gv, self.bv, self.log_dt, self.A_re_log, self.A_im, self.B, self.C)

    def init_state(self, batch_size: int, device=None) -> IDAState:
        device = self.gk.device if device is None else device
        shape = (batch_size, self.num_heads, self.modes, self.head_dim, 2)
        return IDAState(torch.zeros(shape, device=device), torch.zeros(shape, device=device))

    def forward(self, x: Tensor, state: Optional[IDAState] = None, cu_seqlens=None, output_state: bool = True):
        """x [B, T, d_model] (with cu_seqlens: B = 1, sequences packed along T). Returns
        (y [B, T, d_model], IDAState or None)."""
        q, k, v = self._qkv(x)
        initial = None if state is None else (state.k, state.v)
        o, final = ops.ida(q, k, v, self.params, eps=self.eps, initial_state=initial,
                           output_final_state=output_state, cu_seqlens=cu_seqlens)
        y = self._out(o)
        return y, (IDAState(final[0], final[1]) if output_state else None)

    @torch.no_grad()
    def step(self, x_t: Tensor, state: Optional[IDAState] = None):
        """Decodes one token per sequence: x_t [B, d_model] or [B, 1, d_model]; the state's
        tensors are updated in place. Returns (y_t shaped like x_t, state). Inference only."""
        x, squeeze = self._token(x_t)
        if state is None:
            state = self.init_state(x.shape[0], x.device)
        q, k, v = self._qkv(x)
        o, _ = ops.ida_step(q, k, v, self.params, (state.k, state.v), eps=self.eps)
        y = self._out(o)
        return (y.squeeze(1) if squeeze else y), IDAState(state.k, state.v)


@torch.no_grad()
def prefill_then_decode(layer: Union[BLA, IDA], x: Tensor, prefill: int, state=None):
    """Runs x [B, T, d_model] through `layer` as a decoder would: the first `prefill` tokens
    in one chunked forward call, then the rest one step() at a time. Returns (y [B, T,
    d_model], state after the last token); y equals layer(x, state)[0] up to float32 rounding.
    """
    T = x.shape[1]
    if not 0 <= prefill <= T:
        raise ValueError(f"prefill_then_decode: prefill must be in [0, {T}], got {prefill}")
    ys = []
    if prefill > 0:
        y, state = layer(x[:, :prefill], state)
        ys.append(y)
    for t in range(prefill, T):
        y_t, state = layer.step(x[:, t], state)
        ys.append(y_t.unsqueeze(1))
    return torch.cat(ys, dim=1), state
