"""The same corpus through the CUDA backend: both backends must give the same verdicts (marker gpu)."""

from __future__ import annotations

import numpy as np
import pytest
from corpus import CORPUS, CorpusKernel

from kernelopt_jupyter.backends.base import Backend, CompileRequest

pytestmark = pytest.mark.gpu


def verdict(backend: Backend, kernel: CorpusKernel) -> tuple[bool, str]:
    """Run one corpus kernel on a backend; (matches NumPy, first problem)."""
    compiled = backend.compile(CompileRequest(kernel.source(), kernel.entry, defines=dict(kernel.defines)))
    host_args = kernel.arguments()
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in host_args]
    args = [backend.xp.asarray(a) if isinstance(a, np.ndarray) else a for a in host_args]
    dims = kernel.launch(host_args)
    backend.launch(compiled, dims, args)
    backend.synchronize(timeout_s=60)
    for index, want in kernel.expected(before).items():
        got = args[index].get() if hasattr(args[index], "get") else np.asarray(args[index])
        if not np.allclose(got, want, rtol=kernel.rtol, atol=kernel.atol):
            return False, f"argument {index} differs"
    return True, ""


@pytest.fixture(scope="module")
def cuda_backend():
    from kernelopt_jupyter.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    yield backend
    backend.close()


@pytest.mark.parametrize("kernel", CORPUS, ids=[k.name for k in CORPUS])
def test_cpu_and_cuda_agree(backend, cuda_backend, kernel: CorpusKernel) -> None:
    on_cpu = verdict(backend, kernel)
    on_gpu = verdict(cuda_backend, kernel)
    assert on_cpu == on_gpu == (True, ""), f"cpu {on_cpu}, cuda {on_gpu}"
