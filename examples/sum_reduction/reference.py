"""NumPy reference for sum_reduction: the kernel adds the sum of x to ``out`` (which starts at 0)."""

import numpy as np


def sum_reduction(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    # x arrives as a float64 copy, so this sum is far more accurate than any float32 kernel.
    return out + np.sum(x)
