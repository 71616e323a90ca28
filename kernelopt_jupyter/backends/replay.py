"""Running a replay request written by the run store: one kernel, one case, saved inputs, a time.

This runs the kernel in the calling process on purpose: a replay is a standalone script the user
runs by hand (or under ``ncu`` / ``compute-sanitizer``), not part of a notebook session.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..core.launch import LaunchDims
from ..core.scoring import summarize
from ..core.settings import TimingProtocol
from ..core.types import poison_value
from . import create_backend
from .base import CompileFailed, CompileRequest, LaunchFailed


def replay(request_path: Path, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=f"Replay {request_path.name}: run the kernel and print its time."
    )
    parser.add_argument("--backend", choices=["auto", "cupy", "cpu"], default=None)
    parser.add_argument("--samples", type=int, default=None, help="measured launches (default: as recorded)")
    args = parser.parse_args(argv)
    request = json.loads(request_path.read_text())
    here = request_path.parent
    backend = create_backend(args.backend or request.get("backend") or "auto")
    source = (here / request["kernel"]).read_text()
    try:
        kernel = backend.compile(
            CompileRequest(
                source,
                request["entry"],
                tuple(request["options"]),
                dict(request["defines"]),
                filename="best.cu",
            )
        )
    except CompileFailed as exc:
        print(exc.log)
        return 1
    xp = backend.xp
    arguments = []
    for parameter in request["parameters"]:
        dtype = np.dtype(parameter["dtype"])
        if not parameter["pointer"]:
            arguments.append(dtype.type(parameter["value"]))
        elif "file" in parameter:
            arguments.append(xp.asarray(np.load(here / parameter["file"])))
        else:
            arguments.append(xp.full(tuple(parameter["shape"]), poison_value(dtype), dtype=dtype))
    launch = request["launch"]
    dims = LaunchDims(tuple(launch["grid"]), tuple(launch["block"]), int(launch["shared_mem"]))
    recorded = request.get("timing") or {}
    samples = args.samples or recorded.get("samples", 100)
    protocol = TimingProtocol.fixed(recorded.get("warmup", 10), samples)
    try:
        timing = backend.time(lambda: backend.launch(kernel, dims, arguments), protocol)
    except LaunchFailed as exc:
        print(f"{exc.status.value}: {exc.message}")
        return 1
    stats = summarize(timing.samples_us, timing.warmup)
    recorded_us = request.get("recorded_median_us")
    device = backend.device_info().name
    line = f"{request['workload']} / {request['case']} on {device}: median {stats.median_us:.2f} µs"
    line += f" (min {stats.min_us:.2f}, p90 {stats.p90_us:.2f}, {stats.samples} samples)"
    if recorded_us:
        line += f"; recorded {recorded_us:.2f} µs"
    print(line)
    backend.close()
    return 0
