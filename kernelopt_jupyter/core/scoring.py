"""Turning raw samples into statistics, and per-case medians into one score.

The score is the geometric mean of the performance cases' medians: every case counts equally
whatever its absolute size, and a 2x gain on any case moves the score by the same factor.
Correctness cases never count, and a candidate ranks only when every case passed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .results import CaseResult, Status, TimingStats


def summarize(
    samples_us: Sequence[float],
    warmup: int,
    *,
    launches_per_sample: int = 1,
    mode: str = "per_launch",
    cache: str = "warm",
    clock: str = "cuda_events",
    flags: Sequence[str] = (),
    sm_clock_mhz: Sequence[float] = (),
    host_us_per_launch: float | None = None,
    overhead_us: float = 0.0,
) -> TimingStats:
    values = np.asarray(samples_us, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no timing samples")
    mean = float(values.mean())
    return TimingStats(
        median_us=float(np.median(values)),
        min_us=float(values.min()),
        max_us=float(values.max()),
        mean_us=mean,
        p10_us=float(np.percentile(values, 10)),
        p90_us=float(np.percentile(values, 90)),
        cv=float(values.std() / mean) if mean > 0 else 0.0,
        samples=int(values.size),
        warmup=warmup,
        launches_per_sample=launches_per_sample,
        mode=mode,
        cache=cache,
        clock=clock,
        flags=list(flags),
        sm_clock_mhz=list(sm_clock_mhz),
        host_us_per_launch=host_us_per_launch,
        overhead_us=overhead_us,
    )


def geometric_mean(values: Sequence[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError("the geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def score(cases: Sequence[CaseResult]) -> float | None:
    """Geometric mean of performance-case medians (µs), or None if any case failed or none timed."""
    if any(case.status != Status.OK for case in cases):
        return None
    medians = [case.timing.median_us for case in cases if case.kind == "performance" and case.timing]
    if not medians or any(m <= 0 for m in medians):
        return None
    return geometric_mean(medians)


def speedup(baseline_us: float | None, candidate_us: float | None) -> float | None:
    if not baseline_us or not candidate_us:
        return None
    return baseline_us / candidate_us
