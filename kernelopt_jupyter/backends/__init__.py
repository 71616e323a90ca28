"""Backends: where kernels compile and run. ``cupy`` (NVRTC + CUDA events) and ``cpu`` (emulation).

Only the worker process creates a backend; ``auto`` picks CuPy when a CUDA device is usable there,
and CPU emulation otherwise, so the same command works on a laptop, in CI and on a GPU server.
"""

from __future__ import annotations

from typing import Any

from .base import (
    Backend,
    CompiledKernel,
    CompileFailed,
    CompileRequest,
    LaunchFailed,
    TimingSamples,
)

BACKEND_NAMES = ("auto", "cupy", "cpu")

__all__ = [
    "BACKEND_NAMES",
    "Backend",
    "CompileFailed",
    "CompileRequest",
    "CompiledKernel",
    "LaunchFailed",
    "TimingSamples",
    "create_backend",
    "cuda_device_usable",
]


def cuda_device_usable() -> str | None:
    """None when CuPy can see a CUDA device, else the reason it cannot."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None if count > 0 else "no CUDA device found"


def create_backend(name: str = "auto", **options: Any) -> Backend:
    """Create a backend by name. Options are backend-specific (e.g. ``memcheck`` for ``cpu``)."""
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r} (expected one of {', '.join(BACKEND_NAMES)})")
    if name == "auto":
        name = "cupy" if cuda_device_usable() is None else "cpu"
    if name == "cupy":
        reason = cuda_device_usable()
        if reason is not None:
            raise RuntimeError(f"the cupy backend cannot run here: {reason}")
        from .cupy_backend import CupyBackend

        return CupyBackend(**options)
    from .cpu import CpuBackend

    return CpuBackend(**options)
