"""NumPy reference for sgemm: C = A @ B (A is M x K, B is K x N; both arrive as float64 copies)."""

import numpy as np


def sgemm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return A @ B
