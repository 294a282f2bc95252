"""What every Triton op of this package shares: the interpreter switch, NaN-poisoned outputs for
the tests, the device check, and the host side of TMA tensor descriptors."""
from __future__ import annotations

import ctypes
import functools
import os

import torch

try:  # triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover
    TensorDescriptor = None

# Triton reads TRITON_INTERPRET when it first decorates a kernel: it must be set before import.
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# Tests set this so that every output a kernel should write starts as NaN: an element left
# unwritten then fails the comparison instead of passing on leftover memory.
POISON_OUTPUTS = False


def empty(like: torch.Tensor, shape=None, dtype=None) -> torch.Tensor:
    """An output buffer on ``like``'s device (NaN-filled while POISON_OUTPUTS is set)."""
    t = torch.empty(like.shape if shape is None else shape, device=like.device, dtype=dtype or like.dtype)
    return t.fill_(float("nan")) if POISON_OUTPUTS else t


def check_device(t: torch.Tensor, what: str) -> None:
    """CUDA tensors, or CPU tensors under the interpreter; else a sentence saying how to get there."""
    if not t.is_cuda and not INTERPRET:
        raise RuntimeError(f"{what} needs CUDA tensors, or TRITON_INTERPRET=1 set before import for CPU")


@functools.lru_cache(maxsize=None)
def sm90(device: torch.device) -> bool:
    """Compute capability 9.0 or newer: TMA descriptors are available."""
    return torch.cuda.get_device_capability(device)[0] >= 9


@functools.lru_cache(maxsize=None)
def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def bind_context(device: torch.device) -> None:
    """Make the device's primary CUDA context current on this thread. Triton builds host-side TMA
    descriptors with the driver API, which fails ("invalid device context") on a thread where no
    context is current yet: the autograd engine's worker thread, when our backward is the first
    CUDA work it runs (pytorch/pytorch#124565; seen on the H200 with an eager backward)."""
    cuda = _libcuda()
    ctx = ctypes.c_void_p()
    if cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value:
        return
    dev = ctypes.c_int()
    for call in (lambda: cuda.cuDeviceGet(ctypes.byref(dev), device.index),
                 lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                 lambda: cuda.cuCtxSetCurrent(ctx)):
        if call() != 0:
            raise RuntimeError(f"could not make the CUDA context of {device} current for the TMA descriptors")
