"""Shared fixtures; GPU tests skip unless CuPy sees a CUDA device."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]


def _cuda_reason() -> str | None:
    from kernelopt_jupyter.backends import cuda_device_usable

    return cuda_device_usable()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    reason = _cuda_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture
def workload_dir(tmp_path: Path) -> Path:
    """A private copy of the vector_add fixture that a test may edit."""
    target = tmp_path / "vector_add"
    shutil.copytree(FIXTURES / "vector_add", target)
    return target
