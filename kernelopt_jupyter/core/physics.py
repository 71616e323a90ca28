"""Speed-of-light floors: no kernel can move its bytes faster than the memory system or do its flops
faster than the arithmetic units. A timing below the floor is a measurement or a kernel cheating
(doing less work than the case needs), never a win.

The peaks are *measured* once per device (a large copy, an L2-resident copy, an FMA-bound kernel)
and cached, because datasheet numbers are not what a real kernel can reach. The check allows a
margin (``Peaks.margin``) for kernels that genuinely beat a plain copy.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from pydantic import BaseModel

from .atomic import write_json
from .results import CaseResult

# A case may come in at most this far under the floor before it is called impossible.
FLOOR_MARGIN = 0.8
# Host (CPU emulation) timings are wall-clock on a shared machine, and a cache rate measured once
# can be half of what a later, luckier moment reaches, so host floors are looser.
HOST_FLOOR_MARGIN = 0.4


class Peaks(BaseModel):
    """Measured ceilings of one device (or of the host, for the CPU emulation)."""

    device: str
    dram_gbs: float
    l2_gbs: float | None = None
    fp32_gflops: float
    method: str = ""
    margin: float = FLOOR_MARGIN


def floor_us(case: CaseResult, peaks: Peaks, l2_bytes: int | None) -> tuple[float, str] | None:
    """The case's floor in µs and how it was derived, or None without a work model."""
    floors: list[tuple[float, str]] = []
    if case.bytes:
        cold = case.timing is not None and case.timing.cache == "cold"
        # Up to twice the L2 size, warm repeated launches can still find part of the data in L2, so
        # only the (higher) L2 bandwidth is a safe bound there.
        # An unknown cache size (the host) means any working set might be cache resident.
        fits_l2 = (l2_bytes is None or case.bytes <= 2 * l2_bytes) and not cold and peaks.l2_gbs
        bandwidth = peaks.l2_gbs if fits_l2 else peaks.dram_gbs
        where = "L2" if fits_l2 else "memory"
        floors.append(
            (
                case.bytes / (bandwidth * 1e9) * 1e6,
                f"{case.bytes / 1e6:.3g} MB at {bandwidth:.0f} GB/s ({where})",
            )
        )
    if case.flops:
        floors.append(
            (
                case.flops / (peaks.fp32_gflops * 1e9) * 1e6,
                f"{case.flops / 1e9:.3g} GFLOP at {peaks.fp32_gflops:.0f} GFLOP/s",
            )
        )
    return max(floors) if floors else None


def impossible(case: CaseResult, peaks: Peaks, l2_bytes: int | None) -> str | None:
    """Why a timed case is faster than the hardware allows, or None."""
    if case.timing is None:
        return None
    floor = floor_us(case, peaks, l2_bytes)
    if floor is None:
        return None
    value, how = floor
    if case.timing.median_us < peaks.margin * value:
        return (
            f"faster than the hardware allows: median {case.timing.median_us:.3g} µs is under the floor of "
            f"{value:.3g} µs ({how}); the kernel cannot have done the case's work"
        )
    return None


def cache_path() -> Path:
    root = os.environ.get("KERNELOPT_CACHE_DIR") or os.path.join(Path.home(), ".cache", "kernelopt")
    return Path(root) / "peaks.json"


def cached_peaks(key: str) -> Peaks | None:
    path = cache_path()
    try:
        return Peaks.model_validate(json.loads(path.read_text())[key])
    except (OSError, KeyError, ValueError):
        return None


def remember_peaks(key: str, peaks: Peaks) -> None:
    path = cache_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[key] = peaks.model_dump()
    with contextlib.suppress(OSError):  # a read-only home: measure again next time
        write_json(path, data)
