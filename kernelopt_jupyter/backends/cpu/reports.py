"""Turning the runtime's failure reports into :class:`LaunchFailed` messages a user can act on.

The runtime knows lines for barriers and traps (they pass ``__LINE__``), but a memcheck finding or
a crash only has a code address; ``addr2line`` maps it to the candidate's line through the debug
line table, which ``#line`` made refer to the candidate file.
"""

from __future__ import annotations

import functools
import shutil
import signal
import subprocess
from pathlib import Path

from ...core.results import Status
from ..base import LaunchFailed
from . import native
from .native import KernelLibrary, LaunchReport

_FAR = 1 << 20  # beyond this distance from every buffer, naming the nearest one would mislead


@functools.lru_cache(maxsize=512)
def locate(library: str, offset: int, filename: str) -> str | None:
    """``candidate.cu:LINE`` for a code offset in a kernel library, innermost candidate frame first."""
    tool = shutil.which("addr2line") or shutil.which("llvm-addr2line")
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [tool, "-e", library, "-i", "-f", "-C", hex(offset)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.splitlines()
    wanted = Path(filename).name
    for location in lines[1::2]:
        file, _, rest = location.rpartition(":")
        number = rest.split()[0] if rest.split() else ""
        if Path(file).name == wanted and number.isdigit() and number != "0":
            return f"{filename}:{number}"
    return None


def _region(report: LaunchReport, kernel: KernelLibrary, filename: str) -> str:
    offset, size = report.region_offset, report.region_size
    distance = offset - size if offset >= size else (-offset if offset < 0 else 0)
    if report.region_kind == native.REGION_NONE or distance > _FAR:
        return "the address is in no argument array, no shared memory and not on the thread's stack"
    if report.region_kind == native.REGION_ARG:
        name = kernel.names[report.region_index] if report.region_index < len(kernel.names) else ""
        what = f"argument {report.region_index} ({name + ', ' if name else ''}{size} B)"
    elif report.region_kind == native.REGION_SHARED:
        what = f"the __shared__ variable declared at {filename}:{report.region_line} ({size} B)"
    else:
        what = f"the dynamic shared memory ({size} B)"
    if offset >= size:
        return f"{offset - size} bytes past the end of {what}"
    if offset < 0:
        return f"{-offset} bytes before the start of {what}"
    return f"running over the end of {what}"


def launch_failure(report: LaunchReport, kernel: KernelLibrary, filename: str) -> LaunchFailed:
    """The exception for a failed launch (``report.status`` is not OK or CANCELLED)."""
    message = report.message.decode(errors="replace")
    if "@WHERE@" in message:
        where = locate(str(kernel.path), report.pc_offset, filename) if report.pc_in_kernel else None
        message = message.replace("@WHERE@", f" at {where}" if where else "")
    status = report.status
    if status == native.STATUS_MEMCHECK:
        detail = _region(report, kernel, filename)
        return LaunchFailed(Status.CRASHED, f"memcheck: {message}: {detail} (CPU emulation)")
    if status == native.STATUS_INVALID:
        return LaunchFailed(Status.INVALID, message)
    if status == native.STATUS_DEADLOCK:
        return LaunchFailed(Status.CRASHED, f"{message} (CPU emulation)")
    if status == native.STATUS_TRAP:
        return LaunchFailed(Status.CRASHED, f"{message} (CPU emulation)")
    if status == native.STATUS_SIGNAL:
        hint = ""
        overflow = message.startswith("stack overflow")
        if report.signal in (signal.SIGSEGV, signal.SIGBUS) and not kernel.memcheck and not overflow:
            hint = "; run with memcheck to find the out-of-bounds access and its line"
        return LaunchFailed(Status.CRASHED, f"{message} (CPU emulation{hint})", fatal=True)
    return LaunchFailed(Status.CRASHED, f"{message} (CPU emulation)", fatal=True)
