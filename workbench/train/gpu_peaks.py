"""The MFU denominator: each known GPU's dense bf16 matmul rate (docs/performance.md, "MFU").

A GPU is known by a part of the name ``torch.cuda.get_device_name`` gives it; the first entry
whose part is in the name wins, so a variant is listed before its family. A GPU without an entry
(or listed with ``None``) records MFU as null, with the reason in ``mfu_note``.
"""
from __future__ import annotations

# (part of the device name, dense bf16 FLOP/s or None, where the figure comes from)
PEAKS: tuple[tuple[str, float | None, str], ...] = (
    ("H200 NVL", None, "not listed: the NVL part's clocks differ from the SXM one's"),
    ("H200", 790e12, "measured: the dense bf16 matmul ceiling on random data, below the datasheet's 989 TFLOP/s"),
    ("H100 NVL", None, "not listed: the NVL part's clocks differ from the SXM one's"),
    ("H100 PCIe", 756e12, "datasheet: NVIDIA H100 PCIe, 1,513 TFLOP/s bf16 with sparsity, half without"),
    ("H100", 989e12, "datasheet: NVIDIA H100 SXM, 1,979 TFLOP/s bf16 with sparsity, half without"),
    ("A100", 312e12, "datasheet: NVIDIA A100 (SXM and PCIe), 312 TFLOP/s bf16 dense"),
    ("B200", 2250e12, "datasheet: NVIDIA HGX B200, 4.5 PFLOP/s bf16 per GPU with sparsity, half without"),
)


def peak_flops(device_name: str) -> tuple[float | None, str]:
    """(dense bf16 FLOP/s, its source) of the GPU named ``device_name``; (None, why) where unknown."""
    for part, peak, source in PEAKS:
        if part in device_name:
            return peak, source
    return None, f"no dense bf16 peak is listed for {device_name!r} (foxwb.workbench.train.gpu_peaks)"
