"""Wall time of each example's correctness cases on the CPU emulation (target: <= 2 s per example).

    python benchmarks/cpu_examples.py

For every example: the first evaluation compiles the kernel (reported separately); a second one,
with the compiled library cached, measures validating all correctness cases end to end through the
worker (input transfer, launch, comparison). Performance cases are left out, as the target asks.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from kernelopt_jupyter.core.loader import load_workload  # noqa: E402
from kernelopt_jupyter.core.settings import EvaluationSettings  # noqa: E402
from kernelopt_jupyter.worker.evaluator import Evaluator  # noqa: E402


def main() -> None:
    print(f"host: {os.cpu_count()} cores")
    print(f"{'example':<16}{'cases':>6}{'compile s':>11}{'cases s':>10}{'per case s':>12}  status")
    for spec in sorted((HERE.parent / "examples").glob("*/workload.yaml")):
        workload = load_workload(spec)
        checks = [case for case in workload.cases if case.kind == "correctness"]
        only_checks = workload.model_copy(update={"cases": checks}).bind_location(
            workload.spec_path, workload.base_dir
        )
        with Evaluator(only_checks, EvaluationSettings(backend="cpu")) as evaluator:
            evaluator.client.ensure_started()  # start the worker outside the timed region
            first = evaluator.evaluate(workload.kernel_code())
            for case in checks:
                evaluator.cases.get(case, 0)  # inputs and references, outside the timed region
            started = time.perf_counter()
            second = evaluator.evaluate(workload.kernel_code())
            wall = time.perf_counter() - started
        print(
            f"{workload.name:<16}{len(checks):>6}{first.compile_time_s or 0:>11.2f}{wall:>10.2f}"
            f"{wall / len(checks):>12.3f}  {second.status.value}"
        )


if __name__ == "__main__":
    main()
