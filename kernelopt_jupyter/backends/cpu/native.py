"""ctypes bindings to the fiber runtime and to compiled kernel libraries, and argument packing.

The structures mirror ``runtime/kocpu_abi.h``; the ABI version is checked on load so a stale
cached library can never be called with the wrong layout.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ABI_VERSION = 4
MAX_PARAMS = 256

_ULL = ctypes.c_ulonglong


class LaunchDesc(ctypes.Structure):
    _fields_ = [
        ("kernel_main", ctypes.c_void_p),
        ("args", ctypes.POINTER(ctypes.c_void_p)),
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("dynamic_shared", _ULL),
        ("threads", ctypes.c_int),
        ("memcheck", ctypes.c_int),
        ("nregions", ctypes.c_int),
        ("region_base", ctypes.POINTER(_ULL)),
        ("region_size", ctypes.POINTER(_ULL)),
        ("filename", ctypes.c_char_p),
    ]


class LaunchReport(ctypes.Structure):
    _fields_ = [
        ("status", ctypes.c_int),
        ("signal", ctypes.c_int),
        ("is_write", ctypes.c_int),
        ("access_size", ctypes.c_int),
        ("block", ctypes.c_uint * 3),
        ("thread", ctypes.c_uint * 3),
        ("address", _ULL),
        ("pc_offset", _ULL),
        ("pc_in_kernel", ctypes.c_int),
        ("region_kind", ctypes.c_int),
        ("region_index", ctypes.c_int),
        ("region_line", ctypes.c_int),
        ("region_offset", ctypes.c_longlong),
        ("region_size", _ULL),
        ("message", ctypes.c_char * 4096),
    ]


STATUS_OK, STATUS_DEADLOCK, STATUS_MEMCHECK, STATUS_INVALID = 0, 1, 2, 3
STATUS_SIGNAL, STATUS_CANCELLED, STATUS_TRAP, STATUS_INTERNAL = 4, 5, 6, 7
REGION_NONE, REGION_ARG, REGION_SHARED, REGION_DYNAMIC = 0, 1, 2, 3

_runtime_lock = threading.Lock()
_runtime: ctypes.CDLL | None = None


def load_runtime(path: Path) -> ctypes.CDLL:
    """Load the runtime once per process; kernel libraries resolve their runtime calls against it.

    Kernel libraries name the runtime by soname, so the dynamic linker binds every one of them to
    the first runtime loaded; a second runtime (another cache directory) would never be called.
    """
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            library = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            version = library.kocpu_rt_abi_version()
            if version != ABI_VERSION:
                raise RuntimeError(f"{path} has runtime ABI {version}, expected {ABI_VERSION}")
            library.kocpu_rt_launch.argtypes = [ctypes.POINTER(LaunchDesc), ctypes.POINTER(LaunchReport)]
            library.kocpu_rt_launch.restype = ctypes.c_int
            library.kocpu_rt_cancel.argtypes = [ctypes.POINTER(LaunchDesc)]
            library.kocpu_rt_cancel.restype = ctypes.c_int
            library.kocpu_rt_switch_kind.restype = ctypes.c_char_p
            _runtime = library
        return _runtime


_KIND_NAMES = {
    "p": "a pointer",
    "i": "a signed integer",
    "u": "an unsigned integer",
    "f": "a floating-point value",
    "b": "a bool",
    "o": "a struct",
}


@dataclass
class KernelLibrary:
    """A loaded kernel: its library, entry address and parameter kinds/sizes as the compiler saw them."""

    path: Path
    library: ctypes.CDLL
    main: int
    kinds: list[str]
    sizes: list[int]
    names: list[str] = field(default_factory=list)
    memcheck: bool = False

    @classmethod
    def load(cls, path: Path, names: list[str], memcheck: bool) -> KernelLibrary:
        library = ctypes.CDLL(str(path))
        if library.kocpu_kernel_abi() != ABI_VERSION:
            raise RuntimeError(f"{path} was built for another runtime ABI")
        kinds = (ctypes.c_int * MAX_PARAMS)()
        sizes = (ctypes.c_int * MAX_PARAMS)()
        count = library.kocpu_kernel_signature(kinds, sizes, MAX_PARAMS)
        main = ctypes.cast(library.kocpu_kernel_main, ctypes.c_void_p).value
        if main is None:
            raise RuntimeError(f"{path} exports no kernel entry")
        return cls(path, library, main, [chr(k) for k in kinds[:count]], list(sizes[:count]), names, memcheck)

    def param_name(self, index: int) -> str:
        name = self.names[index] if index < len(self.names) else ""
        return f"argument {index} ({name!r})" if name else f"argument {index}"


class ArgumentError(ValueError):
    """Arguments that do not match the kernel's parameters (count, pointer vs scalar, size)."""


@dataclass
class PackedArgs:
    """Argument storage for one launch; kept alive until the launch has finished."""

    argv: Any
    region_base: Any
    region_size: Any
    keep: list[Any]


def _scalar_bytes(kernel: KernelLibrary, index: int, value: Any) -> bytes:
    kind, size = kernel.kinds[index], kernel.sizes[index]
    if isinstance(value, bool | int | float) and not isinstance(value, np.generic):
        dtype = {"f": f"f{size}", "i": f"i{size}", "u": f"u{size}", "b": "?"}.get(kind)
        try:
            value = np.array(value, dtype=dtype)[()] if dtype else value
        except (OverflowError, ValueError) as exc:
            raise ArgumentError(f"{kernel.param_name(index)}: {exc}") from exc
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.hasobject:
        raise ArgumentError(
            f"{kernel.param_name(index)}: the kernel takes {_KIND_NAMES[kind]}, got {type(value).__name__}"
        )
    ok_kind = {"f": "f", "i": "iu", "u": "iu", "b": "b?iu"}.get(kind)
    if array.dtype.itemsize != size or (ok_kind is not None and array.dtype.kind not in ok_kind):
        wanted = f"{_KIND_NAMES[kind]} of {size} bytes"
        raise ArgumentError(f"{kernel.param_name(index)}: the kernel takes {wanted}, got {array.dtype}")
    return array.tobytes()


def pack_arguments(kernel: KernelLibrary, args: Sequence[Any]) -> PackedArgs:
    """Pointers to each argument's value, as the runtime's ``void** args`` (like cuLaunchKernel's)."""
    count = len(kernel.kinds)
    if len(args) != count:
        raise ArgumentError(f"the kernel takes {count} arguments, got {len(args)}")
    argv = (ctypes.c_void_p * max(count, 1))()
    bases = (_ULL * max(count, 1))()
    sizes = (_ULL * max(count, 1))()
    keep: list[Any] = [argv, bases, sizes]
    for index, value in enumerate(args):
        if kernel.kinds[index] == "p":
            if not isinstance(value, np.ndarray):
                raise ArgumentError(
                    f"{kernel.param_name(index)}: the kernel takes a pointer, got {type(value).__name__}"
                )
            if not value.flags.c_contiguous:
                raise ArgumentError(f"{kernel.param_name(index)}: arrays must be C-contiguous")
            pointer = ctypes.c_void_p(value.ctypes.data)
            keep += [value, pointer]
            argv[index] = ctypes.addressof(pointer)
            bases[index], sizes[index] = value.ctypes.data or 0, value.nbytes
        else:
            data = _scalar_bytes(kernel, index, value)
            storage = (ctypes.c_uint64 * ((len(data) + 7) // 8 or 1))()
            ctypes.memmove(storage, data, len(data))
            keep.append(storage)
            argv[index] = ctypes.addressof(storage)
    return PackedArgs(argv, bases, sizes, keep)
