"""Every corpus kernel, run on the CPU emulation, matches its NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from corpus import CORPUS, CorpusKernel

from kernelopt_jupyter.backends.base import CompileRequest
from kernelopt_jupyter.backends.cpu import CpuBackend


@pytest.mark.parametrize("kernel", CORPUS, ids=[k.name for k in CORPUS])
def test_corpus_kernel_matches_numpy(backend: CpuBackend, kernel: CorpusKernel) -> None:
    compiled = backend.compile(CompileRequest(kernel.source(), kernel.entry, defines=dict(kernel.defines)))
    args = kernel.arguments()
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    dims = kernel.launch(args)
    assert backend.check_launch(compiled, dims) is None
    backend.launch(compiled, dims, args)
    backend.synchronize(timeout_s=60)
    expected = kernel.expected(before)
    assert expected, "a corpus entry must check at least one output"
    for index, want in expected.items():
        np.testing.assert_allclose(args[index], want, rtol=kernel.rtol, atol=kernel.atol, err_msg=kernel.name)


def test_corpus_files_are_all_described() -> None:
    from corpus import CORPUS_DIR

    on_disk = {path.stem for path in CORPUS_DIR.glob("*.cu")}
    assert on_disk == {kernel.name for kernel in CORPUS}
