"""Fixtures for the CPU emulation tests: one backend per module, a private library cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelopt_jupyter.backends.cpu import CpuBackend


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Build into a fresh cache so the tests exercise the compiler, not someone's old libraries."""
    patcher = pytest.MonkeyPatch()
    patcher.setenv("KERNELOPT_CACHE_DIR", str(tmp_path_factory.mktemp("kernelopt-cache")))
    yield
    patcher.undo()


@pytest.fixture(scope="module")
def backend() -> Iterator[CpuBackend]:
    cpu = CpuBackend()
    yield cpu
    cpu.close()


@pytest.fixture(scope="module")
def memcheck_backend() -> Iterator[CpuBackend]:
    cpu = CpuBackend(memcheck=True)
    yield cpu
    cpu.close()
