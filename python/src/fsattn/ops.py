"""The mixer functions: fsattn.bla, fsattn.ida, their decode steps and bla_interpolate.

Layout and math: docs/spec.md. Activations are [B, T, H, D] (q, k: Dk; v, o: Dv). States:
BLA (state_k [N, H, S, Dk], state_v [N, H, S, Dv]); IDA (state_k [N, H, M, Dk, 2],
state_v [N, H, M, Dv, 2]), complex as a trailing (re, im) pair; N is B, or the number of
sequences with cu_seqlens.

This module gathers the public names; the code is in
  fsattn._common    argument checks and tensor plumbing shared by both mixers, set_variant
  fsattn._bla       bla, bla_step, bla_interpolate and the BLA library calls
  fsattn._ida       IdaParams, ida, ida_step and the IDA library calls
  fsattn._autograd  the torch.library custom-op registration and the autograd glue
                    (USES_CUSTOM_OPS; the design is described there)
"""

from ._autograd import USES_CUSTOM_OPS
from ._bla import bla, bla_interpolate, bla_step
from ._common import State, Tensor, set_variant
from ._ida import IdaParams, ida, ida_step

__all__ = [
    "IdaParams",
    "bla",
    "ida",
    "bla_step",
    "ida_step",
    "bla_interpolate",
    "set_variant",
    "USES_CUSTOM_OPS",
]

# They present themselves (help, pickle) as fsattn.ops's, where they were defined before.
for _name in __all__[:-1]:
    globals()[_name].__module__ = __name__
del _name
