"""CPU emulation backend: CUDA C++ kernels compiled with the host C++ compiler and run on fibers.

For students, demos and CI without an NVIDIA GPU. Every CUDA thread of a block is a cooperative
fiber, so barriers and warp collectives behave as on a GPU (and a barrier some threads never reach
is reported as a deadlock); blocks run in parallel on the host's cores.
"""

from __future__ import annotations

from .backend import CpuBackend


def worker_environment(memcheck: bool) -> dict[str, str]:
    """Environment the worker process needs for this backend: none.

    Memcheck instruments the candidate's own library (compiler-inserted access checks that call
    the runtime), so unlike AddressSanitizer it needs no preloaded runtime library.
    """
    del memcheck
    return {}


__all__ = ["CpuBackend", "worker_environment"]
