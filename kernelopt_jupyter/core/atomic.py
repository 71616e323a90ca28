"""Atomic file writes: a reader (or a kill at any moment) sees the old file or the new one, never half.

Every file the program writes goes through here: write a temporary file in the same directory,
flush it, then ``os.replace`` it over the target (atomic on POSIX within one file system).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np


def write_with(path: str | Path, writer: Callable[[BinaryIO], None], *, fsync: bool = False) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            writer(handle)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    return write_with(path, lambda handle: handle.write(data))


def write_text(path: str | Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, data: Any) -> Path:
    return write_text(path, json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n")


def write_npy(path: str | Path, array: np.ndarray) -> Path:
    return write_with(path, lambda handle: np.save(handle, np.ascontiguousarray(array), allow_pickle=False))
