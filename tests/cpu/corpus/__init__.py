"""The kernel corpus, as data: every kernel that must validate against NumPy on every backend.

Each entry names a ``<name>.cu`` file next to this module and says how to build its arguments from
a seeded RNG, how to launch it, and what NumPy expects in each output argument. Nothing here is
specific to the CPU emulation, so the same corpus can run through the CUDA backend and the two
backends' verdicts can be compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernelopt_jupyter.core.launch import LaunchDims

CORPUS_DIR = Path(__file__).resolve().parent

Args = list[Any]


@dataclass(frozen=True)
class CorpusKernel:
    """``make_args`` gets ``np.random.default_rng(seed)``; ``expected`` gets a copy of the arguments
    as they were before the launch and returns {argument index: expected array}."""

    name: str
    entry: str
    make_args: Callable[[np.random.Generator], Args]
    launch: Callable[[Args], LaunchDims]
    expected: Callable[[Args], dict[int, np.ndarray]]
    rtol: float = 1e-5
    atol: float = 1e-6
    defines: Mapping[str, int | float | str] = field(default_factory=dict)
    seed: int = 20240601

    @property
    def path(self) -> Path:
        return CORPUS_DIR / f"{self.name}.cu"

    def source(self) -> str:
        return self.path.read_text()

    def arguments(self) -> Args:
        return self.make_args(np.random.default_rng(self.seed))


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _dims(grid: tuple[int, ...], block: tuple[int, ...], shared: int = 0) -> LaunchDims:
    g = (*grid, 1, 1)[:3]
    b = (*block, 1, 1)[:3]
    return LaunchDims(grid=(g[0], g[1], g[2]), block=(b[0], b[1], b[2]), shared_mem=shared)


def _floats(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _nan(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return np.full(shape, np.nan, dtype=dtype)


N_VEC = 10_007
N_STRIDE = 100_003
N_REDUCE = 70_001
M, N, K = 100, 75, 130
ROWS, COLS = 100, 70
N_HIST, BINS = 50_000, 64
SM_ROWS, SM_COLS, SM_BLOCK = 37, 300, 128
N_VEC4 = 10_003
N_TEMPLATE = 5_000


def _block_sums(x: np.ndarray, per_block: int) -> np.ndarray:
    padded = np.zeros(_ceil(x.size, per_block) * per_block, dtype=np.float64)
    padded[: x.size] = x
    return padded.reshape(-1, per_block).sum(axis=1).astype(np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)


CORPUS: list[CorpusKernel] = [
    CorpusKernel(
        "vector_add",
        "vector_add",
        lambda rng: [_floats(rng, N_VEC), _floats(rng, N_VEC), _nan(N_VEC), np.int32(N_VEC)],
        lambda a: _dims((_ceil(N_VEC, 256),), (256,)),
        lambda a: {2: a[0] + a[1]},
    ),
    CorpusKernel(
        "grid_stride",
        "saxpy_grid_stride",
        lambda rng: [np.int32(N_STRIDE), np.float32(1.5), _floats(rng, N_STRIDE), _floats(rng, N_STRIDE)],
        lambda a: _dims((8,), (128,)),
        lambda a: {3: (np.float32(1.5) * a[2] + a[3]).astype(np.float32)},
        rtol=1e-6,
    ),
    CorpusKernel(
        "shared_reduction",
        "block_sum",
        lambda rng: [_floats(rng, N_REDUCE), _nan(_ceil(N_REDUCE, 512)), np.int32(N_REDUCE)],
        lambda a: _dims((_ceil(N_REDUCE, 512),), (256,)),
        lambda a: {1: _block_sums(a[0], 512)},
        rtol=1e-4,
        atol=1e-4,
    ),
    CorpusKernel(
        "warp_shuffle_reduction",
        "warp_block_sum",
        lambda rng: [_floats(rng, N_REDUCE), _nan(_ceil(N_REDUCE, 192)), np.int32(N_REDUCE)],
        lambda a: _dims((_ceil(N_REDUCE, 192),), (192,)),
        lambda a: {1: _block_sums(a[0], 192)},
        rtol=1e-4,
        atol=1e-4,
    ),
    CorpusKernel(
        "tiled_sgemm",
        "sgemm_tiled",
        lambda rng: [
            np.int32(M),
            np.int32(N),
            np.int32(K),
            _floats(rng, M, K),
            _floats(rng, K, N),
            _nan(M, N),
        ],
        lambda a: _dims((_ceil(N, 16), _ceil(M, 16)), (16, 16)),
        lambda a: {5: (a[3].astype(np.float64) @ a[4].astype(np.float64)).astype(np.float32)},
        rtol=1e-4,
        atol=1e-4,
    ),
    CorpusKernel(
        "transpose_padded",
        "transpose_padded",
        lambda rng: [_floats(rng, ROWS, COLS), _nan(COLS, ROWS), np.int32(ROWS), np.int32(COLS)],
        lambda a: _dims((_ceil(COLS, 32), _ceil(ROWS, 32)), (32, 8)),
        lambda a: {1: np.ascontiguousarray(a[0].T)},
        rtol=0.0,
        atol=0.0,
    ),
    CorpusKernel(
        "histogram_atomics",
        "histogram",
        lambda rng: [
            rng.integers(0, 1 << 20, N_HIST).astype(np.uint32),
            np.zeros(BINS, np.uint32),
            np.int32(N_HIST),
            np.int32(BINS),
        ],
        lambda a: _dims((16,), (256,), BINS * 4),
        lambda a: {1: np.bincount(a[0] % BINS, minlength=BINS).astype(np.uint32)},
        rtol=0.0,
        atol=0.0,
    ),
    CorpusKernel(
        "softmax_dynamic_shared",
        "softmax_rows",
        lambda rng: [
            _floats(rng, SM_ROWS, SM_COLS),
            _nan(SM_ROWS, SM_COLS),
            np.int32(SM_ROWS),
            np.int32(SM_COLS),
        ],
        lambda a: _dims((SM_ROWS,), (SM_BLOCK,), SM_BLOCK * 4),
        lambda a: {1: _softmax(a[0].astype(np.float64))},
        rtol=1e-5,
        atol=1e-6,
    ),
    CorpusKernel(
        "float4_loads",
        "scale_vec4",
        lambda rng: [_floats(rng, N_VEC4), _nan(N_VEC4), np.int32(N_VEC4), np.float32(0.75)],
        lambda a: _dims((_ceil(N_VEC4 // 4, 128),), (128,)),
        lambda a: {1: (np.float32(0.75) * a[0] + np.float32(1.0)).astype(np.float32)},
        rtol=1e-6,
    ),
    CorpusKernel(
        "templated_axpby",
        "axpby<128, double>",
        lambda rng: [
            rng.standard_normal(N_TEMPLATE),
            rng.standard_normal(N_TEMPLATE),
            np.float64(2.0),
            np.float64(-0.5),
            np.int32(N_TEMPLATE),
        ],
        lambda a: _dims((_ceil(N_TEMPLATE, 128),), (128,)),
        lambda a: {1: 2.0 * a[0] - 0.5 * a[1]},
        rtol=1e-12,
        atol=0.0,
    ),
]

BY_NAME = {kernel.name: kernel for kernel in CORPUS}
