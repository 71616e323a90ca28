"""Evaluation settings: how candidates are validated and timed. Saved with every run.

The defaults are the honest ones (``docs/validation.md``): two validation trials on fresh inputs,
a repeat run that must agree, re-validation after timing, launch overhead kept out (a replayed
CUDA graph for kernels of 10 µs and more, back-to-back launches below), at least 10 warm-up + 100
measured launches, and sampling on until the noise is under 0.5 % or a second per case is spent.
``TimingProtocol.seed_compatible()`` gives the original tool's protocol (one event pair per
launch, exactly 100 samples) for comparisons.
"""

from __future__ import annotations

import secrets
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TimingProtocol(BaseModel):
    """How one performance case is timed.

    ``mode``: ``per_launch`` brackets every launch with its own clock readings (seed-compatible);
    other modes are backend-specific ways to keep launch overhead out of the numbers; ``auto``
    lets the backend pick the one that agrees best with hardware counters for the kernel's length
    (the mode it used is recorded with every timing). Sampling takes
    at least ``samples``; with ``budget_s`` or ``target_cv`` it may stop later (up to
    ``max_samples``) once the noise is low enough or the time budget is spent.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    warmup: int = Field(10, ge=0)
    samples: int = Field(100, ge=1)
    max_samples: int = Field(100_000, ge=1)
    budget_s: float | None = Field(1.0, gt=0)
    target_cv: float | None = Field(0.005, gt=0)
    mode: Literal["auto", "per_launch", "back_to_back", "graph"] = "auto"
    launches_per_sample: int = Field(0, ge=0, description="0: enough launches for about sample_us")
    sample_us: float = Field(
        500.0,
        gt=0,
        description="a sample's length when launches_per_sample is 0 (at most 50 launches): long "
        "enough that the ~2 µs an event pair adds is under 1 % of it",
    )
    cache: Literal["warm", "cold"] = "warm"
    host_check: bool = Field(True, description="also time a few synchronous launches by the host clock")

    @classmethod
    def seed_compatible(cls) -> TimingProtocol:
        """The original optimizer's protocol: 10 warm-up, exactly 100 launches, one event pair each."""
        return cls(warmup=10, samples=100, max_samples=100, budget_s=None, target_cv=None, mode="per_launch")

    def auto_as(self, mode: Literal["per_launch", "back_to_back", "graph"]) -> TimingProtocol:
        """This protocol with ``auto`` settled as ``mode``; a mode asked for by name stays."""
        return self.model_copy(update={"mode": mode}) if self.mode == "auto" else self

    @classmethod
    def fixed(cls, warmup: int, samples: int, **extra: object) -> TimingProtocol:
        """Exactly ``samples`` measured launches (no adaptive stopping), e.g. for quick tests."""
        return cls(
            warmup=warmup, samples=samples, max_samples=samples, budget_s=None, target_cv=None, **extra
        )


class EvaluationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Literal["auto", "cupy", "cpu"] = "auto"
    seed: int = Field(0, description="seed of the first trial's inputs, saved with the run for replay")
    secret_seed: int = Field(
        default_factory=lambda: secrets.randbits(63),
        repr=False,
        description="seed of every later trial; written to the run only at its end",
    )
    trials: int = Field(2, ge=1, description="validation runs per case, each on fresh inputs")
    repeat_check: bool = Field(True, description="run twice on identical inputs; outputs must agree")
    revalidate_after_timing: bool = Field(True, description="validate again on fresh inputs after timing")
    launch_timeout_s: float = Field(10.0, gt=0)
    compile_timeout_s: float = Field(300.0, gt=0)
    memcheck: bool = Field(False, description="CPU emulation only: report out-of-bounds accesses")
    physics_floor: bool = Field(True, description="a case faster than the measured peaks allow is invalid")
    timing: TimingProtocol = Field(default_factory=TimingProtocol)

    def public_dump(self) -> dict[str, object]:
        """Everything except the secret seed, which must not be seen while the run is going."""
        return self.model_dump(mode="json", exclude={"secret_seed"})
