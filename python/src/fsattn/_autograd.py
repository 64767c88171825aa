"""The torch.library custom-op registration and the autograd glue of the library calls.

Each op has one implementation function (``_*_impl``, in fsattn._bla and fsattn._ida) that
allocates the outputs and calls the C library through ``fsattn._ext`` with the tensors' data
pointers, on the tensors' device and, for CUDA, on torch.cuda.current_stream(). Autograd is
wired in one of two ways:

* torch >= 2.4 (``torch.library.custom_op``): the impls are registered as the custom ops
  ``fsattn::bla_fwd``, ``fsattn::bla_bwd``, ``fsattn::ida_fwd``, ``fsattn::ida_bwd``,
  ``fsattn::bla_step`` and ``fsattn::ida_step`` with fake (meta) implementations, and the
  forward ops get their backward through ``register_autograd``; torch.compile(fullgraph=True)
  traces them. (The steps call their impl directly in eager mode, which is what the custom op
  would run, to keep the per-token overhead small; under torch.compile they go through the op.)
* older torch (or FSATTN_DISABLE_CUSTOM_OPS=1): a torch.autograd.Function per mixer whose
  forward and backward call the same impls.

Both paths share each mixer's setup_context/backward pair. A gradient of an output that the
loss does not use arrives as None (or, where torch materialises it, as zeros); an unrequested
final state is an empty tensor.
"""

import os
from typing import Optional

import torch
from torch.autograd.function import once_differentiable

Tensor = torch.Tensor

USES_CUSTOM_OPS = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and (
    os.environ.get("FSATTN_DISABLE_CUSTOM_OPS", "").lower() not in ("1", "true", "yes", "on")
)

# torch.compiler.is_compiling (torch >= 2.3; dynamo answers True while tracing), looked up
# once: a missing attribute of the torch module is slow to look up on every call.
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)


def _grad_or_none(g: Optional[Tensor], wanted: bool) -> Optional[Tensor]:
    if not wanted or g is None or g.numel() == 0:
        return None
    return g.float().contiguous()


def custom_op(name: str, impl, fake, mutates=()):
    """impl registered as the custom op fsattn::<name>, with fake as its fake implementation
    and mutating the arguments named in mutates; None without custom ops."""
    if not USES_CUSTOM_OPS:
        return None
    op = torch.library.custom_op("fsattn::" + name, mutates_args=mutates)(impl)
    op.register_fake(fake)
    return op


def library_call(name: str, impl, fake):
    """What to call for impl: the custom op fsattn::<name>, or without custom ops impl itself."""
    op = custom_op(name, impl, fake)
    return impl if op is None else op


def differentiable(name: str, impl, fake, setup_context, backward, function_name: str):
    """impl with autograd, both paths calling setup_context(ctx, inputs, output) and
    backward(ctx, *output_grads): the custom op fsattn::<name> with register_autograd, or
    without custom ops the apply of a torch.autograd.Function named function_name."""
    op = custom_op(name, impl, fake)
    if op is not None:
        op.register_autograd(backward, setup_context=setup_context)
        return op

    def forward(ctx, *inputs):
        out = impl(*inputs)
        setup_context(ctx, inputs, out)
        ctx.set_materialize_grads(False)
        return out

    def function_backward(ctx, *grads):
        return backward(ctx, *grads)

    function = type(torch.autograd.Function)(function_name, (torch.autograd.Function,), {
        "forward": staticmethod(forward),
        "backward": staticmethod(once_differentiable(function_backward)),
    })
    return function.apply
