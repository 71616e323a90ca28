"""What an evaluation produces: per-output checks, per-case timings, and the candidate's verdict.

These are plain pydantic models so that the worker can send them as JSON, the run store can write
them to ``history.json``, and every front end reads the same fields.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Status(StrEnum):
    """A candidate's (or one case's) verdict. Only ``ok`` candidates rank."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    WRONG = "wrong"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    INVALID = "invalid"
    SKIPPED = "skipped"


# When several cases fail differently, the candidate reports the most severe.
SEVERITY = [
    Status.OK,
    Status.SKIPPED,
    Status.WRONG,
    Status.INVALID,
    Status.TIMEOUT,
    Status.CRASHED,
    Status.COMPILE_ERROR,
]


class _Model(BaseModel):
    # Infinity/NaN errors are real results (a NaN output); keep them through JSON as strings.
    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="strings")


class Mismatch(_Model):
    """The first element that fails the tolerance, with both values (as text: NaN must survive JSON)."""

    index: list[int]
    got: str
    expected: str


class OutputCheck(_Model):
    """How one output compares with the reference."""

    name: str
    passed: bool
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    rel_norm_error: float = 0.0
    mismatches: int = 0
    nonfinite: int = Field(0, description="elements NaN/Inf where the reference is finite")
    first_mismatch: Mismatch | None = None
    reason: str = ""


class TimingStats(_Model):
    """Summary of timed samples, in microseconds per launch."""

    median_us: float
    min_us: float
    max_us: float
    mean_us: float
    p10_us: float
    p90_us: float
    cv: float = Field(description="standard deviation over mean of the samples")
    samples: int
    warmup: int
    launches_per_sample: int = 1
    mode: str = "per_launch"
    cache: str = "warm"
    clock: str = "cuda_events"
    flags: list[str] = Field(default_factory=list)
    sm_clock_mhz: list[float] = Field(default_factory=list, description="SM clock before and after sampling")
    host_us_per_launch: float | None = Field(None, description="wall time per synchronous launch")
    overhead_us: float = Field(0.0, description="per-sample timing overhead measured and taken off")


class KernelAttributes(_Model):
    """Resource use reported by the compiler/driver for the compiled kernel."""

    registers: int | None = None
    static_shared_bytes: int | None = None
    local_bytes: int | None = None
    const_bytes: int | None = None
    max_threads_per_block: int | None = None
    ptx_version: int | None = None
    binary_version: int | None = None


class DeviceInfo(_Model):
    """What the evaluation ran on; the CPU emulator describes itself as such."""

    backend: str
    name: str
    emulated: bool = False
    compute_capability: str | None = None
    sm_count: int | None = None
    max_threads_per_block: int = 1024
    max_block_dims: list[int] = Field(default_factory=lambda: [1024, 1024, 64])
    max_grid_dims: list[int] = Field(default_factory=lambda: [2**31 - 1, 65535, 65535])
    shared_mem_per_block: int | None = None
    shared_mem_per_block_optin: int | None = None
    shared_mem_per_sm: int | None = None
    registers_per_block: int | None = None
    registers_per_sm: int | None = None
    l2_cache_bytes: int | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    memory_bus_width_bits: int | None = None
    peak_bandwidth_gbs: float | None = None
    total_memory_bytes: int | None = None
    warp_size: int = 32
    driver: str | None = None
    library_versions: dict[str, str] = Field(default_factory=dict)


class CaseResult(_Model):
    name: str
    kind: str
    status: Status
    message: str = ""
    sizes: dict[str, int] = Field(default_factory=dict)
    grid: list[int] = Field(default_factory=list)
    block: list[int] = Field(default_factory=list)
    shared_mem: int = 0
    trials: int = 0
    outputs: list[OutputCheck] = Field(default_factory=list)
    timing: TimingStats | None = None
    flops: float | None = None
    bytes: float | None = None
    flags: list[str] = Field(default_factory=list)
    seconds: dict[str, float] = Field(default_factory=dict, description="worker wall time per phase")

    @property
    def median_us(self) -> float | None:
        return self.timing.median_us if self.timing else None

    def throughput(self) -> dict[str, float]:
        """GFLOP/s and GB/s from the work model, when both it and a timing exist."""
        values: dict[str, float] = {}
        if self.timing and self.timing.median_us > 0:
            seconds = self.timing.median_us * 1e-6
            if self.flops:
                values["gflops"] = self.flops / seconds / 1e9
            if self.bytes:
                values["gbs"] = self.bytes / seconds / 1e9
        return values


class CandidateResult(_Model):
    status: Status
    message: str = ""
    backend: str = ""
    device: str = ""
    compile_log: str = ""
    compile_time_s: float | None = None
    attributes: KernelAttributes | None = None
    cases: list[CaseResult] = Field(default_factory=list)
    score_us: float | None = Field(None, description="geometric mean of performance-case medians")
    knobs: dict[str, int | float | str] = Field(default_factory=dict)
    source_hash: str = ""

    @property
    def ranks(self) -> bool:
        return self.status == Status.OK and self.score_us is not None

    def case(self, name: str) -> CaseResult | None:
        return next((case for case in self.cases if case.name == name), None)


def worst(statuses: list[Status]) -> Status:
    """The most severe status, which becomes the candidate's when cases disagree."""
    return max(statuses, key=SEVERITY.index, default=Status.OK)
