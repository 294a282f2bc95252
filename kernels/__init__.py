"""The workbench's kernels, one subpackage per operation, each with its reference twin (``naive``),
its Triton kernels and the op torch sees:

- ``foxwb.kernels.attention``: forgetting attention (``forgetting_attention``), with adaptive
  computation pruning;
- ``foxwb.kernels.qkv_prep``: KV-shift and QK-norm from the block's projection (``prepare_qkv``);
- ``foxwb.kernels.loss``: the LM head's cross-entropy (``linear_cross_entropy``).

``foxwb.kernels.runtime`` holds what they share. This package imports nothing else of the workbench.
"""
from foxwb.kernels.attention import BACKENDS, forgetting_attention, forgetting_attention_naive
from foxwb.kernels.loss import linear_cross_entropy_naive
from foxwb.kernels.qkv_prep import prepare_qkv_naive


def __getattr__(name: str):
    if name == "prepare_qkv":
        # The Triton ops are imported on first use: Triton reads TRITON_INTERPRET when it decorates a kernel.
        from foxwb.kernels.qkv_prep.op import prepare_qkv

        return prepare_qkv
    if name == "linear_cross_entropy":
        # On first use too, as prepare_qkv's: TRITON_INTERPRET is read when the kernel is decorated.
        from foxwb.kernels.loss.op import linear_cross_entropy

        return linear_cross_entropy
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")


__all__ = ["BACKENDS", "forgetting_attention", "forgetting_attention_naive", "linear_cross_entropy",
           "linear_cross_entropy_naive", "prepare_qkv", "prepare_qkv_naive"]
