"""The LM head's loss: the reference twin (``naive.py``), the Triton row kernel (``triton_ce.py``)
and the op torch sees (``op.py``)."""
from foxwb.kernels.loss.naive import linear_cross_entropy_naive


def __getattr__(name: str):
    if name == "linear_cross_entropy":
        # The op is imported on first use: Triton reads TRITON_INTERPRET when it decorates a kernel.
        from foxwb.kernels.loss.op import linear_cross_entropy

        return linear_cross_entropy
    raise AttributeError(f"module 'foxwb.kernels.loss' has no attribute {name!r}")


__all__ = ["linear_cross_entropy", "linear_cross_entropy_naive"]
