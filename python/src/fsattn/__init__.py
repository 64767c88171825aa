"""fsattn: PyTorch bindings of the fsattn library (IDA and BLA fixed-state attention mixers).

    o, state = fsattn.bla(q, k, v, log_gamma, modes=31, period=256.0, slots=64, output_final_state=True)
    o, state = fsattn.ida(q, k, v, fsattn.IdaParams(...), output_final_state=True)
    o, state = fsattn.bla_step(q1, k1, v1, log_gamma, state, pos=T, modes=31, period=256.0)

The math: docs/spec.md of the repository. Layers: fsattn.nn. PyTorch must be importable (it
is not a declared dependency: any torch from 1.13 on works).
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError("fsattn needs PyTorch: install torch (1.13 or later) first; fsattn does not pull it in") from e

from . import _ext
from ._ext import FsattnError, UnsupportedError
from .ops import (
    USES_CUSTOM_OPS,
    IdaParams,
    bla,
    bla_interpolate,
    bla_step,
    ida,
    ida_step,
    set_variant,
)
from . import nn  # noqa: E402

__version__ = "1.1.0"

_OPS = {
    "ida_forward": _ext.OP_IDA_FORWARD,
    "ida_backward": _ext.OP_IDA_BACKWARD,
    "bla_forward": _ext.OP_BLA_FORWARD,
    "bla_backward": _ext.OP_BLA_BACKWARD,
    "bla_interpolate": _ext.OP_BLA_INTERPOLATE,
    "ida_step": _ext.OP_IDA_STEP,
    "bla_step": _ext.OP_BLA_STEP,
}


def _device_code(device) -> int:
    kind = device if isinstance(device, str) else getattr(device, "type", None)
    if kind is not None and kind.split(":")[0] in ("cpu", "cuda"):
        return 0 if kind.split(":")[0] == "cpu" else 1
    raise ValueError(f"fsattn: device must be 'cpu' or 'cuda', got {device!r}")


def library_version() -> str:
    """The version of the loaded libfsattn ("MAJOR.MINOR.PATCH")."""
    return _ext.version()


def variants(op: str, device="cpu"):
    """Names of the compiled schedule variants of op ("bla_forward", ...) on a device."""
    if op not in _OPS:
        raise ValueError(f"fsattn.variants: unknown op {op!r}, one of {sorted(_OPS)}")
    return _ext.variant_names(_OPS[op], _device_code(device))


def device_name(device="cpu"):
    """The device as tuning files name it (None when there is none)."""
    return _ext.device_name(_device_code(device))


def tuning_info() -> str:
    return _ext.tuning_info()


def load_tuning(path=None) -> None:
    """Use the tuning file at path (None: the built-in table)."""
    _ext.load_tuning(None if path is None else str(path))


def release_workspace() -> None:
    _ext.release_workspace()


def set_workspace_limit(nbytes: int) -> None:
    _ext.set_workspace_limit(int(nbytes))


__all__ = [
    "FsattnError",
    "UnsupportedError",
    "IdaParams",
    "USES_CUSTOM_OPS",
    "bla",
    "ida",
    "bla_step",
    "ida_step",
    "bla_interpolate",
    "set_variant",
    "variants",
    "device_name",
    "tuning_info",
    "load_tuning",
    "release_workspace",
    "set_workspace_limit",
    "library_version",
    "nn",
]
