"""NumPy reference for saxpy. Arrays arrive as float64 copies and ``a`` as a Python float."""

import numpy as np


def saxpy(a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return a * x + y
