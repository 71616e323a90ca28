"""NumPy reference for row-wise softmax (x arrives as a float64 copy of shape (rows, cols))."""

import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / exponentials.sum(axis=1, keepdims=True)
