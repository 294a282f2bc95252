"""The MFU denominator by GPU (foxwb.workbench.train.gpu_peaks): names as torch.cuda.get_device_name
gives them, each family's variants told apart, and an unknown GPU refused with its name."""
import pytest

from foxwb.workbench.train.gpu_peaks import PEAKS, peak_flops


@pytest.mark.parametrize("name,peak", [
    ("NVIDIA H100 80GB HBM3", 989e12),  # the SXM part
    ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H200", 790e12),
    ("NVIDIA A100-SXM4-80GB", 312e12),
    ("NVIDIA A100-PCIE-40GB", 312e12),
    ("NVIDIA A100 80GB PCIe", 312e12),
    ("NVIDIA B200", 2250e12),
])
def test_a_known_gpu_has_its_dense_bf16_peak_and_its_source(name, peak):
    found, source = peak_flops(name)
    assert found == peak
    assert source.startswith(("datasheet:", "measured:"))


@pytest.mark.parametrize("name", ["NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GeForce RTX 4090", "NVIDIA L40S"])
def test_a_gpu_without_a_listed_peak_records_no_mfu_and_says_why(name):
    found, why = peak_flops(name)
    assert found is None and why


def test_a_variant_is_listed_before_its_family():
    """The first matching part wins: 'H100' before 'H100 PCIe' would give the PCIe card the SXM peak."""
    parts = [part for part, _, _ in PEAKS]
    for i, part in enumerate(parts):
        assert not any(earlier in part for earlier in parts[:i]), f"{part!r} is shadowed by an earlier entry"
