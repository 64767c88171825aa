import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))  # fsattn_reference


def _torch_at_least(major: int, minor: int) -> bool:
    parts = torch.__version__.split("+")[0].split(".")
    return (int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)) >= (major, minor)


TORCH_24 = _torch_at_least(2, 4) and hasattr(torch.library, "custom_op")
HAS_CUDA = torch.cuda.is_available()

requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
requires_torch24 = pytest.mark.skipif(not TORCH_24, reason="needs torch >= 2.4 (torch.library.custom_op)")


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)
