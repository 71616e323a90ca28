"""Holding a CUDA stream while the host queues a batch of launches behind it (nvbench's method).

Timing a short kernel with events from Python measures the host's launch rate, not the kernel: the
GPU waits for each launch. A kernel that spins on a host-mapped flag holds the stream instead; the
host queues a whole batch of samples behind it and releases the flag, and the batch runs back to
back. The spin gives up after about five seconds, so a host that never releases (an exception, a
deadlock) costs five seconds, not a hung device.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator
from typing import Any

import cupy
import numpy as np

_BLOCKER_SOURCE = r"""
extern "C" __global__ void kernelopt_hold_stream(volatile int* flag, long long timeout_cycles) {
    long long start = clock64();
    while (flag[0] == 0) {
        if (clock64() - start > timeout_cycles) { flag[1] = 1; return; }
    }
}
"""
_MAPPED = 0x02  # cudaHostAllocMapped
HOLD_LOCK = threading.Lock()
"""Taken for as long as a stream is held, and by every module load (``CupyBackend.compile``).
Loading a module may wait for the device to go quiet (CUDA's lazy-loading notes warn of exactly
this with spinning kernels), and a compile thread's load waits while holding the context: the
timing thread can then queue nothing more, never releases the hold, and it gives up after 5 s.
Seen in an SGEMM sweep: three such stalls turned a 5 s sweep into 21 s."""


class StreamHold:
    """A kernel that holds a stream until the host has queued a whole batch behind it."""

    def __init__(self, clock_mhz: float | None) -> None:
        self.kernel = cupy.RawKernel(_BLOCKER_SOURCE, "kernelopt_hold_stream")
        self.host = cupy.cuda.runtime.hostAlloc(8, _MAPPED)
        self.flag = (ctypes.c_int * 2).from_address(self.host)
        self.timeout_cycles = np.int64(int((clock_mhz or 2000) * 1e6 * 5))  # about five seconds

    @contextlib.contextmanager
    def held(self, stream: Any) -> Iterator[None]:
        """Hold ``stream`` while the body queues work behind it; released however the body ends,
        and no module loads meanwhile (:data:`HOLD_LOCK`)."""
        with HOLD_LOCK:
            self.hold(stream)
            try:
                yield
            finally:
                self.release()

    def hold(self, stream: Any) -> None:
        """Start holding; prefer :meth:`held`, which also keeps module loads out."""
        self.flag[0] = 0
        self.flag[1] = 0
        self.kernel((1,), (1,), (np.intp(self.host), self.timeout_cycles), stream=stream)

    def release(self) -> None:
        self.flag[0] = 1

    def timed_out(self) -> bool:
        """The hold gave up before release: part of the batch ran while still being queued."""
        return bool(self.flag[1])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            cupy.cuda.runtime.freeHost(self.host)
