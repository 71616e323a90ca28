"""Sweep throughput: kernelopt's tuning sweep vs Kernel Tuner on the same SGEMM space, same GPU, same run.

    python benchmarks/sweep_throughput.py [--skip-kernel-tuner] [--max-configs N] [--only-launch]
                                          [--backend cupy|cpu] [--finalist-window F]

Part 1 sweeps the register-blocked SGEMM of ``benchmarks/sgemm_sweep/`` at 2048^3 (block and tile
sizes as knobs, every configuration verified) through kernelopt, then through Kernel Tuner's
``tune_kernel(lang="CUPY")`` when it is importable. Part 2 sweeps ``benchmarks/launch_sweep/``, a
grid-stride saxpy over 16M floats whose 30 configurations change only the launch (one module),
then the same kernel over a wider space of 192 launch shapes.
``cupy.matmul`` (cuBLAS) is timed as the vendor reference. Each engine gets a fresh, empty CuPy
kernel cache, so compile times are real. Prints one table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kernelopt_jupyter.core.loader import load_workload  # noqa: E402
from kernelopt_jupyter.core.settings import EvaluationSettings  # noqa: E402
from kernelopt_jupyter.core.workload import TuningSpace  # noqa: E402
from kernelopt_jupyter.session import Session, SweepSettings  # noqa: E402


def fresh_cupy_cache() -> str:
    path = tempfile.mkdtemp(prefix="cupy-cache-")
    os.environ["CUPY_CACHE_DIR"] = path
    return path


def run_kernelopt(
    workload, label: str, max_configs: int | None, results: Path, backend: str, sweep: SweepSettings
) -> dict:
    fresh_cupy_cache()
    settings = EvaluationSettings(backend=backend)
    started = time.perf_counter()
    with Session(workload, settings=settings, results_dir=results) as session:
        session.start()
        setup_s = time.perf_counter() - started
        report = session.tune(replace(sweep, max_configs=max_configs))
        best = report.best
        baseline = session.baseline
    total_s = time.perf_counter() - started
    screened = [o for o in report.outcomes if not o.final]
    finalists_s = report.phases_s.get("finalists (full protocol)", 0.0)
    return {
        "engine": label,
        "configs": report.configs,
        "valid": sum(1 for o in screened if o.result.ranks),
        "skipped": len(report.skipped),
        "compiles": report.compile_groups,
        "wall_s": report.wall_s,
        "total_s": total_s,
        "setup_s": setup_s,
        "configs_per_s": report.configs_per_s,
        "screen_per_s": len(screened) / max(1e-9, report.wall_s - finalists_s),
        "best": " ".join(f"{k}={v}" for k, v in best.knobs.items()) if best else "-",
        "best_us": best.result.score_us if best else None,
        "baseline_us": baseline.score_us if baseline and baseline.ranks else None,
        "details": [
            f"{report.configs} configs: "
            + ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in report.phases_s.items()),
            "compile (worker thread pool, overlapping device work): "
            f"{np.mean([o.result.compile_time_s or 0 for o in screened]) * 1000:.0f} ms per module (mean)",
        ],
    }


def pad_short_device_uuid(cupy) -> None:
    """Kernel Tuner 1.5.0 records the device UUID from CuPy's property dict and fails ("bytes is
    not a 16-char string") when it is shorter than 16 bytes, as it was on one H200 of the pool (a
    UUID with a zero byte, cut there when the C array became bytes). It is only metadata: pad it."""
    original = cupy.cuda.runtime.getDeviceProperties

    def padded(device: int) -> dict:
        properties = dict(original(device))
        uuid = properties.get("uuid")
        if isinstance(uuid, bytes) and len(uuid) < 16:
            properties["uuid"] = uuid.ljust(16, b"\0")
        return properties

    cupy.cuda.runtime.getDeviceProperties = padded


def run_kernel_tuner(workload, max_configs: int | None) -> dict | None:
    try:
        import kernel_tuner
    except ImportError:
        return None
    import cupy

    pad_short_device_uuid(cupy)
    fresh_cupy_cache()
    case = workload.cases[0]
    m, n, k = case.sizes["M"], case.sizes["N"], case.sizes["K"]
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    answer = cupy.asnumpy(cupy.matmul(cupy.asarray(a), cupy.asarray(b)))
    space: TuningSpace = workload.tuning
    tune_params = {name: list(values) for name, values in space.knobs.items()}
    strategy, options = (None, None)
    if max_configs is not None:
        strategy, options = "random_sample", {"max_fevals": max_configs}
    started = time.perf_counter()
    results, _env = kernel_tuner.tune_kernel(
        "sgemm",
        workload.kernel_code(),
        (n, m),
        [a, b, c, np.int32(m), np.int32(n), np.int32(k)],
        tune_params,
        grid_div_x=["block_size_x", "TN"],
        grid_div_y=["block_size_y", "TM"],
        restrictions=list(space.restrictions),
        answer=[None, None, answer, None, None, None],
        atol=1e-2,
        lang="CUPY",
        quiet=True,
        strategy=strategy,
        strategy_options=options,
    )
    wall = time.perf_counter() - started
    valid = [r for r in results if isinstance(r.get("time"), int | float)]
    best = min(valid, key=lambda r: r["time"]) if valid else None
    mean = lambda key: float(np.mean([r.get(key, 0) for r in valid])) if valid else 0.0  # noqa: E731
    return {
        "engine": f"kernel_tuner {kernel_tuner.__version__}",
        "configs": len(results),
        "valid": len(valid),
        "skipped": 0,
        "compiles": len(results),
        "wall_s": wall,
        "total_s": wall,
        "setup_s": 0.0,
        "configs_per_s": len(results) / wall,
        "best": " ".join(f"{k}={best[k]}" for k in tune_params) if best else "-",
        "best_us": best["time"] * 1000 if best else None,
        "details": [
            f"per config: compile {mean('compile_time'):.0f} ms, "
            f"verification {mean('verification_time'):.0f} ms, "
            f"benchmark {mean('benchmark_time'):.0f} ms (means over valid configs)"
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-kernel-tuner", action="store_true")
    parser.add_argument("--max-configs", type=int, default=None)
    parser.add_argument("--only-launch", action="store_true", help="only the launch-only sweep")
    parser.add_argument("--backend", default="cupy", help="cupy (the figures); cpu tries it without a GPU")
    parser.add_argument(
        "--finalist-window", type=float, default=0.15, help="finalists: within this fraction of the best"
    )
    args = parser.parse_args()
    results = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    sweep = SweepSettings(finalist_window=args.finalist_window)
    rows: list[dict] = []
    if not args.only_launch:
        workload = load_workload(HERE / "sgemm_sweep" / "workload.yaml")
        row = run_kernelopt(workload, "kernelopt sweep", args.max_configs, results, args.backend, sweep)
        rows.append(row)
        if not args.skip_kernel_tuner:
            tuned = run_kernel_tuner(workload, args.max_configs)
            rows.append(tuned or {"engine": "kernel_tuner (not importable)", "configs": 0})
    launch_only = load_workload(HERE / "launch_sweep" / "workload.yaml")
    rows.append(run_kernelopt(launch_only, "kernelopt launch-only", None, results, args.backend, sweep))
    wide = launch_only.model_copy(update={"tuning": wide_launch_space(launch_only.tuning)})
    rows.append(run_kernelopt(wide, "kernelopt launch-only, wide", None, results, args.backend, sweep))
    shutil.rmtree(results, ignore_errors=True)
    print_table(rows)


def wide_launch_space(space: TuningSpace) -> TuningSpace:
    """Every block size from 32 to 1024 in warps, times the same elements per thread: 192 shapes of
    one module, a space as wide as a launch tuner would search; the finalists' fixed cost spreads
    over more configurations."""
    knobs = dict(space.knobs, BLOCK=list(range(32, 1025, 32)))
    return TuningSpace(knobs=knobs, restrictions=list(space.restrictions))


def print_table(rows: list[dict]) -> None:
    import pandas as pd

    columns = {
        "engine": "engine",
        "configs": "configs",
        "valid": "valid",
        "compiles": "compiles",
        "wall_s": "sweep s",
        "total_s": "total s",
        "configs_per_s": "configs/s",
        "screen_per_s": "screen/s",
        "best_us": "best µs",
        "best": "best config",
    }
    table = pd.DataFrame([{title: row.get(key) for key, title in columns.items()} for row in rows])
    baseline = rows[0].get("baseline_us")
    if baseline:
        table.loc[len(table)] = {
            "engine": "cuBLAS (cupy.matmul)",
            "best µs": baseline,
            "best config": "(vendor)",
        }
    print(table.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.2f}"))
    for row in rows:
        for line in row.get("details", []):
            print(f"{row['engine']}: {line}")
    print(
        "sweep s: the sweep alone (kernelopt: validation + screening of every config, then the full protocol"
    )
    print("on 5 finalists); total s adds worker start, inputs, the float64 reference and the baseline.")
    print("screen/s: configurations validated and screened per second, the finalists' stage left out.")
    print(
        "best µs: kernelopt = median under the full protocol; Kernel Tuner = its reported time (mean of 7)."
    )


if __name__ == "__main__":
    main()
