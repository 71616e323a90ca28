"""The host C++ compiler behind the CPU emulation: finding it, building libraries, caching them.

Built libraries are cached by a hash of everything that affects the build (translated source,
flags, compiler version, runtime and prelude sources), under ``$KERNELOPT_CACHE_DIR/cpu`` or
``~/.cache/kernelopt/cpu``, so compiling the same candidate again is a file lookup. Files are
written under a temporary name and renamed, so concurrent builds (threads or processes) of the
same key are harmless.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
RUNTIME_SOURCES = ("kocpu_context.cpp", "kocpu_fibers.cpp", "kocpu_launch.cpp", "kocpu_reports.cpp")
RUNTIME_NAME = "libkocpu_rt.so"
TU_NAME = "kernelopt-cpu-tu.cpp"  # the translation unit's own name; the linker may cite it
BUILD_TIMEOUT_S = 300.0

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class ToolchainError(Exception):
    """No usable compiler, or a build that failed; ``log`` is the compiler's own output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]
    version: str
    family: str  # "gcc" or "clang": their diagnostic and sanitizer flags differ

    def describe(self) -> str:
        return self.version


@functools.lru_cache(maxsize=4)
def _probe(command: tuple[str, ...]) -> Compiler | None:
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = (done.stdout or done.stderr).strip().splitlines()
    version = first[0].strip() if first else "unknown"
    return Compiler(command, version, "clang" if "clang" in version.lower() else "gcc")


def find_compiler() -> Compiler:
    """``$CXX`` if set, else ``g++``, else ``clang++``."""
    configured = os.environ.get("CXX", "").strip()
    candidates = [tuple(shlex.split(configured))] if configured else [("g++",), ("clang++",), ("c++",)]
    for command in candidates:
        compiler = _probe(command)
        if compiler is not None:
            return compiler
    wanted = f"$CXX={configured!r}" if configured else "g++ or clang++"
    raise ToolchainError(f"the CPU emulation needs a C++17 compiler on this machine ({wanted} was not found)")


def cache_dir() -> Path:
    root = os.environ.get("KERNELOPT_CACHE_DIR")
    path = Path(root) / "cpu" if root else Path.home() / ".cache" / "kernelopt" / "cpu"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def _digest(*parts: str | bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode() if isinstance(part, str) else part)
        hasher.update(b"\0")
    return hasher.hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def runtime_sources_digest() -> str:
    """Hash of the shipped runtime and prelude: any change invalidates every cached library."""
    files = sorted(RUNTIME_DIR.glob("*.h")) + sorted(RUNTIME_DIR.glob("*.cpp"))
    return _digest(*(f.name + "\n" + f.read_text() for f in files))


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"the C++ compiler did not finish within {BUILD_TIMEOUT_S:.0f} s") from exc
    except OSError as exc:
        raise ToolchainError(f"could not run the C++ compiler: {exc}") from exc


def runtime_library(compiler: Compiler, *, ucontext: bool = False) -> Path:
    """The fiber runtime shared library, built once per compiler and runtime version."""
    flags = ["-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden", "-fno-exceptions"]
    if ucontext:
        flags.append("-DKOCPU_UCONTEXT=1")
    key = _digest("runtime", compiler.version, *compiler.command, *flags, runtime_sources_digest())
    target = cache_dir() / f"rt-{key}" / RUNTIME_NAME
    if target.exists():
        return target
    with _lock(str(target)):
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{RUNTIME_NAME}.{os.getpid()}.{threading.get_ident()}")
        sources = [str(RUNTIME_DIR / name) for name in RUNTIME_SOURCES]
        command = [
            *compiler.command,
            *flags,
            f"-I{RUNTIME_DIR}",
            *sources,
            "-o",
            str(temporary),
            f"-Wl,-soname,{RUNTIME_NAME}",
            "-ldl",
        ]
        done = _run(command, target.parent)
        if done.returncode != 0:
            raise ToolchainError("building the CPU emulation runtime failed", done.stderr)
        os.replace(temporary, target)
    return target


def kernel_flags(compiler: Compiler, *, memcheck: bool, std: str) -> list[str]:
    """Flags for a candidate: the brief's -O2 build, plus call-only address instrumentation for memcheck."""
    flags = [
        f"-std={std}",
        "-O2",
        "-fPIC",
        "-shared",
        "-fno-strict-aliasing",
        "-fno-math-errno",
        "-fvisibility=hidden",
        "-fno-exceptions",
        "-fno-finite-loops",
        "-fstack-clash-protection",
        "-Wno-narrowing",
    ]
    if compiler.family == "clang":
        flags += ["-ferror-limit=10", "-fno-caret-diagnostics", "-fno-color-diagnostics"]
    else:
        flags += ["-fmax-errors=10", "-fno-diagnostics-show-caret", "-fdiagnostics-color=never"]
    flags.append("-g")  # line tables map crash and memcheck addresses to candidate lines (costs ~5%)
    if not memcheck:
        return flags
    flags += ["-DKOCPU_MEMCHECK_BUILD=1", "-fsanitize=kernel-address"]
    if compiler.family == "clang":
        return [
            *flags,
            "-mllvm",
            "-asan-instrumentation-with-call-threshold=0",
            "-mllvm",
            "-asan-stack=0",
            "-mllvm",
            "-asan-globals=0",
        ]
    return [
        *flags,
        "--param",
        "asan-instrumentation-with-call-threshold=0",
        "--param",
        "asan-stack=0",
        "--param",
        "asan-globals=0",
    ]


@dataclass(frozen=True)
class Build:
    path: Path
    log: str
    cached: bool


def build_kernel(compiler: Compiler, text: str, flags: list[str], runtime: Path) -> Build:
    """Compile a translation unit into a shared library (or find it in the cache)."""
    key = _digest(
        "kernel",
        compiler.version,
        *compiler.command,
        *flags,
        runtime.parent.name,
        runtime_sources_digest(),
        text,
    )
    target = cache_dir() / f"k-{key}.so"
    log_file = target.with_suffix(".log")
    if target.exists():
        return Build(target, log_file.read_text() if log_file.exists() else "", cached=True)
    with _lock(str(target)):
        if target.exists():
            return Build(target, log_file.read_text() if log_file.exists() else "", cached=True)
        with tempfile.TemporaryDirectory(prefix="kocpu-") as work:
            source = Path(work) / TU_NAME
            source.write_text(text)
            temporary = Path(work) / "kernel.so"
            command = [
                *compiler.command,
                "-x",
                "c++",
                *flags,
                f"-I{RUNTIME_DIR}",
                str(source),
                "-x",
                "none",
                "-o",
                str(temporary),
                f"-L{runtime.parent}",
                "-lkocpu_rt",
                f"-Wl,-rpath,{runtime.parent}",
                "-Wl,--no-undefined",
            ]
            done = _run(command, Path(work))
            log = _relative(done.stderr, work)
            if done.returncode != 0:
                raise ToolchainError("compilation failed", log)
            staged = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
            shutil.copyfile(temporary, staged)
            log_file.write_text(log)
            os.replace(staged, target)
    return Build(target, log, cached=False)


def _relative(text: str, work: str) -> str:
    return text.replace(f"{work}/", "").replace(f"{RUNTIME_DIR}/", "")


_NOISE = re.compile(
    r"^(?:In file included from|\s+from |compilation terminated|collect2: error|clang(?:\+\+)?: error: linker"
    r"|\d+ errors? generated|/usr/bin/ld: .*: in function|.*\bld returned \d+ exit status)"
)
_LD_PREFIX = re.compile(r"^(?:/\S*/)?ld(?:\.\w+)?: (?:\S+\.o: )?")


def summarize_log(log: str, filename: str, entry: str, launcher: str, limit: int = 24) -> str:
    """The compiler's output cut to what a user needs: first errors first, no prelude plumbing."""
    kept: list[str] = []
    for raw in log.splitlines():
        line = raw.rstrip()
        if not line.strip() or _NOISE.match(line):
            continue
        line = _LD_PREFIX.sub("", line).replace(TU_NAME, filename)
        if launcher in line:
            message = line.split("error:", 1)[1].strip() if "error:" in line else line
            if "error:" not in line:
                continue
            hint = " (for a template kernel give an instance, e.g. name<64, 8>)" if "<" not in entry else ""
            line = f"{filename}: cannot use entry {entry!r} as the kernel: {message}{hint}"
        if line not in kept:
            kept.append(line)
    if len(kept) > limit:
        kept = [*kept[:limit], f"... ({len(kept) - limit} more lines)"]
    return "\n".join(kept)
