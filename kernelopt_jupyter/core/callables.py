"""Finding user functions named in a spec: ``reference.py:softmax`` or ``package.module:function``.

References, input generators and baselines are the user's own trusted code, so importing them is
fine; what matters is that a wrong name fails with the file and function spelled out, and that a
function given as a Python object can be written back into a run as a name the worker can import.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class CallableNotFound(LookupError):
    """The named file, module or function does not exist; the message says which."""


def split_reference(reference: str) -> tuple[str, str]:
    location, sep, function = reference.rpartition(":")
    if not sep or not location or not function:
        raise CallableNotFound(f"{reference!r} is not of the form 'file.py:function' or 'module:function'")
    return location, function


def resolve_callable(reference: str | Callable[..., Any], base_dir: Path) -> Callable[..., Any]:
    """Return the function a reference names (a callable passes through unchanged)."""
    if callable(reference):
        return reference
    location, function_name = split_reference(reference)
    module = _load_module(location, base_dir)
    target: Any = module
    for part in function_name.split("."):
        if not hasattr(target, part):
            raise CallableNotFound(f"{location} has no function {function_name!r}")
        target = getattr(target, part)
    if not callable(target):
        raise CallableNotFound(f"{location}:{function_name} is not callable")
    return target


def _load_module(location: str, base_dir: Path) -> Any:
    if location.endswith(".py") or "/" in location:
        path = (base_dir / location).resolve()
        if not path.is_file():
            raise CallableNotFound(f"file {path} does not exist")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
        name = f"kernelopt_user_{path.stem}_{digest}"
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            raise
        return module
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as exc:
        raise CallableNotFound(f"module {location!r} cannot be imported ({exc})") from None


def callable_reference(reference: str | Callable[..., Any], base_dir: Path | None = None) -> str:
    """A name another process can import: the spec's own string, or ``module:qualname``.

    File references are made absolute so the worker resolves them from any directory.
    """
    if isinstance(reference, str):
        location, function = split_reference(reference)
        if base_dir is not None and (location.endswith(".py") or "/" in location):
            location = str((base_dir / location).resolve())
        return f"{location}:{function}"
    module = getattr(reference, "__module__", None)
    qualname = getattr(reference, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        raise CallableNotFound(
            f"{reference!r} is defined in a notebook or script; put it in a .py file "
            "and name it as 'file.py:function' so the worker process can import it"
        )
    module_file = getattr(sys.modules.get(module), "__file__", None)
    if module.startswith("kernelopt_user_") and module_file:
        return f"{module_file}:{qualname}"
    return f"{module}:{qualname}"
