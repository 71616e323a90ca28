"""NumPy reference for transpose: dst (cols x rows) = src (rows x cols) transposed."""

import numpy as np


def transpose(src: np.ndarray) -> np.ndarray:
    return src.T.copy()
