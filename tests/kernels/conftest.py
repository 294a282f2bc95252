"""Every kernel test runs with NaN-poisoned outputs: an element a kernel leaves unwritten fails."""
import pytest

from foxwb.kernels import runtime


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    monkeypatch.setattr(runtime, "POISON_OUTPUTS", True)
