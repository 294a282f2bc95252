"""KV-shift and QK-norm from the block's projection to the attention's q, k, v: the reference twin
(``naive.py``), the Triton kernels (``triton_qkv.py``) and the op torch sees (``op.py``)."""
from foxwb.kernels.qkv_prep.naive import prepare_qkv_naive


def __getattr__(name: str):
    if name == "prepare_qkv":
        # The op is imported on first use: Triton reads TRITON_INTERPRET when it decorates a kernel.
        from foxwb.kernels.qkv_prep.op import prepare_qkv

        return prepare_qkv
    raise AttributeError(f"module 'foxwb.kernels.qkv_prep' has no attribute {name!r}")


__all__ = ["prepare_qkv", "prepare_qkv_naive"]
