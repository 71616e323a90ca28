"""Resolving launch configurations: spec defaults, per-case overrides, and a candidate's own.

A candidate may change grid, block and dynamic shared memory per case. Precedence, most specific
first: the candidate's per-case override, the candidate's default, the spec's per-case override,
the spec's default. Expressions may use the case's size variables and the tuning knobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from .expressions import Number, parse_expression
from .results import DeviceInfo, KernelAttributes
from .workload import Expression, ExpressionText, LaunchOverride, LaunchSpec


@dataclass(frozen=True)
class LaunchDims:
    """A concrete launch: three grid and three block dimensions and dynamic shared memory bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def as_dict(self) -> dict[str, list[int] | int]:
        return {"grid": list(self.grid), "block": list(self.block), "shared_mem": self.shared_mem}


class CandidateLaunch(BaseModel):
    """A candidate's launch configuration: an optional default and optional per-case overrides."""

    model_config = ConfigDict(extra="forbid")

    grid: list[Expression] | None = Field(None, min_length=1, max_length=3)
    block: list[Expression] | None = Field(None, min_length=1, max_length=3)
    shared_mem: Expression | None = None
    cases: dict[str, LaunchOverride] = Field(default_factory=dict)


def resolve_launch(
    spec: LaunchSpec,
    case_name: str,
    variables: Mapping[str, Number],
    candidate: CandidateLaunch | None = None,
) -> LaunchDims:
    layers: list[LaunchOverride] = [spec]
    if case_name in spec.cases:
        layers.append(spec.cases[case_name])
    if candidate is not None:
        layers.append(
            LaunchOverride(grid=candidate.grid, block=candidate.block, shared_mem=candidate.shared_mem)
        )
        if case_name in candidate.cases:
            layers.append(candidate.cases[case_name])
    grid = block = shared = None
    for layer in layers:
        grid = layer.grid if layer.grid is not None else grid
        block = layer.block if layer.block is not None else block
        shared = layer.shared_mem if layer.shared_mem is not None else shared
    assert grid is not None and block is not None
    return LaunchDims(
        grid=_dims(grid, variables, "grid"),
        block=_dims(block, variables, "block"),
        shared_mem=parse_expression(shared if shared is not None else 0).integer(variables, "shared_mem"),
    )


def _dims(items: list[ExpressionText], variables: Mapping[str, Number], what: str) -> tuple[int, int, int]:
    values = [parse_expression(item).integer(variables, what) for item in items]
    values += [1] * (3 - len(values))
    return (values[0], values[1], values[2])


def launch_limit_reason(
    device: DeviceInfo, dims: LaunchDims, attributes: KernelAttributes | None = None
) -> str | None:
    """Why a launch cannot run on this device (or this compiled kernel), or None if it can.

    Checked before launching so that an impossible configuration is reported as ``invalid`` with
    the limit it breaks, rather than as a driver error code.
    """
    if min(dims.grid) < 1 or min(dims.block) < 1:
        return f"grid {list(dims.grid)} and block {list(dims.block)} must be at least 1 in every dimension"
    if dims.threads_per_block > device.max_threads_per_block:
        limit = device.max_threads_per_block
        return f"block {list(dims.block)} has {dims.threads_per_block} threads; the limit is {limit}"
    for axis, (size, limit) in enumerate(zip(dims.block, device.max_block_dims, strict=True)):
        if size > limit:
            return f"block dimension {'xyz'[axis]} is {size}; the limit is {limit}"
    for axis, (size, limit) in enumerate(zip(dims.grid, device.max_grid_dims, strict=True)):
        if size > limit:
            return f"grid dimension {'xyz'[axis]} is {size}; the limit is {limit}"
    static = 0
    if attributes is not None:
        kernel_limit = attributes.max_threads_per_block
        if kernel_limit is not None and dims.threads_per_block > kernel_limit:
            why = f" (it uses {attributes.registers} registers per thread)" if attributes.registers else ""
            threads = dims.threads_per_block
            return f"block of {threads} threads exceeds this kernel's limit of {kernel_limit}{why}"
        static = attributes.static_shared_bytes or 0
    limit = device.shared_mem_per_block_optin or device.shared_mem_per_block
    if limit is not None and dims.shared_mem + static > limit:
        return (
            f"{dims.shared_mem} B dynamic + {static} B static shared memory exceeds the {limit} B per block"
        )
    return None
