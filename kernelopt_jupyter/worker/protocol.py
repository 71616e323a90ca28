"""The wire format between the notebook-side client and the worker process.

Messages are JSON objects in length-prefixed frames on a pair of pipes: plain data only, never
pickled code, so nothing the worker sends can execute in the parent. Arrays travel as ``.npy`` files
in a shared exchange directory (on ``/dev/shm`` where it exists, so they never touch a disk).

A reply is ``{"ok": true, "result": ...}`` or ``{"ok": false, "status": ..., "error": ...,
"fatal": bool}``; a fatal reply means the worker exits right after sending it (its device
state is unusable) and the client starts a fresh one.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, BinaryIO

_HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024


class ConnectionClosed(EOFError):
    """The other side went away (for the client: the worker died)."""


def encode(message: dict[str, Any]) -> bytes:
    payload = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(payload)) + payload


def write_message(stream: BinaryIO, message: dict[str, Any]) -> None:
    stream.write(encode(message))
    stream.flush()


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, size - len(chunks))
        if not chunk:
            raise ConnectionClosed("connection closed")
        chunks += chunk
    return bytes(chunks)


def read_message(fd: int) -> dict[str, Any]:
    """Read one frame from a file descriptor (blocking)."""
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    if size > MAX_FRAME:
        raise ConnectionClosed(f"frame of {size} bytes is larger than allowed")
    message = json.loads(_read_exactly(fd, size))
    if not isinstance(message, dict):
        raise ConnectionClosed("malformed message")
    return message


def exchange_root() -> str | None:
    """A memory-backed directory for array files when the system has one."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
