"""Comparisons the kernel tests share."""
import torch


def close(got: torch.Tensor, ref: torch.Tensor, tol: float, floor: float = 0.0) -> None:
    """||got - ref|| <= tol * ||ref|| + floor * sqrt(n), in fp64; NaN never passes (an element the
    kernel did not write, or a tile it should have skipped)."""
    assert not torch.isnan(got).any(), "NaN in output (an element the kernel did not write?)"
    err = (got.double() - ref.double()).norm().item()
    bound = tol * ref.double().norm().item() + floor * ref.numel() ** 0.5
    assert err <= bound, f"error {err:.3e} > bound {bound:.3e} (|ref| = {ref.double().norm().item():.3e})"


def rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    """||got - ref|| / ||ref|| in fp64, after checking got holds no NaN."""
    assert not torch.isnan(got).any(), "NaN in output (an element the kernel did not write?)"
    got, ref = got.double(), ref.double()
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
