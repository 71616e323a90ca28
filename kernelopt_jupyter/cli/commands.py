"""The ``kernelopt`` subcommands: ``evaluate``, ``tune``, ``show``.

Each command is a small class with ``register`` (its arguments) and ``run``; ``kernelopt run``
(the model-driven loop) will be one more entry in :data:`COMMANDS`. Commands talk only to the
session layer.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.errors import SpecWarning, UsageError
from ..core.launch import CandidateLaunch
from ..core.loader import load_workload
from ..core.results import Status
from ..core.settings import EvaluationSettings, TimingProtocol
from ..core.store import HistoryEntry, read_run
from ..core.workload import Workload
from ..session import Session, SweepOutcome, SweepSettings, evaluate_once
from ..session.tables import case_table, failure_lines, history_table


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", "-w", required=True, type=Path, help="workload spec (YAML or JSON)")
    parser.add_argument(
        "--backend",
        choices=["auto", "cupy", "cpu"],
        default="auto",
        help="cupy (NVRTC on a CUDA GPU), cpu (CUDA C emulated on the host); auto picks cupy if usable",
    )
    parser.add_argument(
        "--memcheck", action="store_true", help="CPU emulation: report out-of-bounds accesses"
    )
    parser.add_argument(
        "--launch-timeout", type=float, default=10.0, help="seconds before a launch counts as hung"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the saved inputs (default 0)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON only")
    timing = parser.add_argument_group("timing")
    timing.add_argument(
        "--warmup", type=int, default=10, help="warm-up launches per performance case (default 10)"
    )
    timing.add_argument(
        "--samples", type=int, default=100, help="at least this many samples per case (default 100)"
    )
    timing.add_argument(
        "--budget",
        type=float,
        default=1.0,
        help="sample until the CV is under 0.5%% or this many seconds per case are spent "
        "(default 1; 0 = exactly --samples)",
    )
    timing.add_argument(
        "--mode",
        choices=["auto", "back_to_back", "graph", "per_launch"],
        default="auto",
        help="back_to_back and graph keep launch overhead out; auto = graph for kernels of 10 µs "
        "and more, back_to_back below; per_launch = one event pair per launch",
    )
    timing.add_argument(
        "--cold", action="store_true", help="evict the L2 (read a buffer twice its size) before every sample"
    )
    timing.add_argument(
        "--seed-compatible",
        action="store_true",
        help="the original tool's protocol: 10 warm-up + 100 launches, one event pair each, "
        "one validation trial",
    )


def _settings(args: argparse.Namespace) -> EvaluationSettings:
    if args.warmup < 0 or args.samples < 1 or args.budget < 0:
        raise UsageError("--warmup and --budget must be >= 0 and --samples >= 1")
    cache = "cold" if args.cold else "warm"
    if args.seed_compatible:
        timing = TimingProtocol.seed_compatible()
    elif args.budget == 0:
        timing = TimingProtocol.fixed(args.warmup, args.samples, mode=args.mode, cache=cache)
    else:
        timing = TimingProtocol(
            warmup=args.warmup, samples=args.samples, budget_s=args.budget, mode=args.mode, cache=cache
        )
    validation = {"trials": 1, "repeat_check": False, "revalidate_after_timing": False}
    return EvaluationSettings(
        backend=args.backend,
        memcheck=args.memcheck,
        timing=timing,
        launch_timeout_s=args.launch_timeout,
        seed=args.seed,
        **(validation if args.seed_compatible else {}),
    )


def _load(path: Path) -> Workload:
    """Load a spec; its warnings go to stderr (Python's own warning line would repeat them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecWarning)
        workload = load_workload(path)
    for message in workload.warnings:
        print(f"kernelopt: warning: {message}", file=sys.stderr)
    return workload


def _knobs(items: list[str] | None) -> dict[str, int | float | str]:
    knobs: dict[str, int | float | str] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise UsageError(f"--knob expects NAME=VALUE, got {item!r}")
        value: int | float | str = text
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        knobs[name] = value
    return knobs


def _launch(text: str | None) -> CandidateLaunch | None:
    if not text:
        return None
    try:
        return CandidateLaunch.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        raise UsageError(f"--launch is not valid JSON: {exc.msg}") from None
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise UsageError(f"--launch: {where}: {problem['msg']}") from None


def _emulation_note(device_name: str, emulated: bool) -> str:
    return " (CPU emulation)" if emulated and "emulation" not in device_name.lower() else ""


def _print(text: str = "") -> None:
    print(text, flush=True)


class EvaluateCommand:
    name = "evaluate"

    @classmethod
    def register(cls, sub: Any) -> None:
        parser = sub.add_parser(
            cls.name,
            help="evaluate one kernel on every case and print a per-case table",
            description="Compile KERNEL.cu, validate it on every case against the reference, "
            "time the performance cases, and print a per-case table.",
        )
        parser.add_argument("kernel", type=Path, metavar="KERNEL.cu")
        _common(parser)
        parser.add_argument(
            "--knob", action="append", metavar="NAME=VALUE", help="tuning knob value (repeatable)"
        )
        parser.add_argument("--launch", metavar="JSON", help="launch override, e.g. '{\"block\": [128]}'")
        parser.set_defaults(handler=cls.run)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        workload = _load(args.workload)
        if not args.kernel.is_file():
            raise UsageError(f"kernel file {args.kernel} not found")
        launch = _launch(args.launch)
        result, device = evaluate_once(
            workload,
            args.kernel.read_text(),
            launch=launch,
            knobs=_knobs(args.knob),
            settings=_settings(args),
        )
        if args.json:
            _print(result.model_dump_json(indent=2))
        else:
            _print(
                f"{workload.name} — {args.kernel.name} on {device.name}"
                + _emulation_note(device.name, device.emulated)
            )
            _print(case_table(result).to_string(index=False))
            for line in failure_lines(result):
                _print(f"  ! {line}")
            score = (
                f"{result.score_us:.3f} µs (geometric mean of performance-case medians)"
                if result.score_us
                else "—"
            )
            _print(f"status: {result.status.value}   score: {score}")
        return 0 if result.status == Status.OK else 1


class TuneCommand:
    name = "tune"

    @classmethod
    def register(cls, sub: Any) -> None:
        parser = sub.add_parser(
            cls.name,
            help="sweep the spec's tuning space and keep the fastest validated config",
            description="Evaluate the initial kernel, then every configuration of the tuning space "
            "(validated on every case, screened with a short timing); re-time the best "
            "few side by side with the full protocol and validate them again with every "
            "check; write results/run-NNN/.",
        )
        _common(parser)
        parser.add_argument("--max-configs", type=int, default=None, help="sample at most N configurations")
        parser.add_argument(
            "--finalists", type=int, default=5, help="configurations re-timed with the full protocol"
        )
        parser.add_argument(
            "--finalist-window",
            type=float,
            default=0.15,
            metavar="FRACTION",
            help="only screens within this fraction of the fastest become finalists (default 0.15)",
        )
        parser.add_argument(
            "--results", type=Path, default=Path("results"), help="where run-NNN/ goes (default results/)"
        )
        parser.set_defaults(handler=cls.run)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        if args.max_configs is not None and args.max_configs < 1:
            raise UsageError("--max-configs must be at least 1")
        if args.finalists < 1 or args.finalist_window < 0:
            raise UsageError("--finalists must be at least 1 and --finalist-window at least 0")
        workload = _load(args.workload)
        if workload.tuning is None or not workload.tuning.knobs:
            raise UsageError(
                f"{args.workload} has no tuning space ('tuning: knobs:'), so there is nothing to sweep"
            )
        with Session(workload, settings=_settings(args), results_dir=args.results) as session:
            store = session.start()
            if not args.json:
                device = session.device
                _print(
                    f"{workload.name} on {device.name}"
                    + _emulation_note(device.name, device.emulated)
                    + f" — run {store.path}"
                )
                if session.baseline_note:
                    _print(f"  note: {session.baseline_note}")
            initial = session.evaluate_initial()
            if not args.json:
                _print(f"initial kernel: {_verdict(initial)}")
            progress = _Progress(args.json)
            report = session.tune(
                SweepSettings(
                    max_configs=args.max_configs,
                    finalists=args.finalists,
                    finalist_window=args.finalist_window,
                ),
                progress,
            )
        summary, _ = read_run(store.path)
        if args.json:
            _print(
                json.dumps(
                    {
                        "run": str(store.path),
                        "summary": summary,
                        "sweep": {
                            "space_size": report.space_size,
                            "configs": report.configs,
                            "skipped": len(report.skipped),
                            "wall_s": report.wall_s,
                            "configs_per_s": report.configs_per_s,
                        },
                    },
                    indent=2,
                )
            )
            return 0
        _print(
            f"swept {report.configs} of {report.space_size} configurations in {report.wall_s:.1f} s "
            f"({report.configs_per_s:.1f} configs/s; {len(report.skipped)} skipped over device limits, "
            f"{report.count(Status.COMPILE_ERROR)} compile errors, {report.count(Status.WRONG)} wrong)"
        )
        for knobs, reason in report.skipped[:5]:
            _print(f"  skipped {_knob_text(knobs)}: {reason}")
        _print_summary(summary, store.path)
        return 0


class _Progress:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.count = 0

    def __call__(self, outcome: SweepOutcome, entry: HistoryEntry) -> None:
        self.count += 1
        if not self.quiet:
            prefix = "final" if outcome.final else f"{self.count:5d}"
            _print(f"{prefix} {_knob_text(outcome.knobs):<40} {_verdict(entry)}")


def _knob_text(knobs: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in knobs.items())


def _verdict(entry: HistoryEntry) -> str:
    result = entry.result
    if result.status == Status.OK and result.score_us:
        return f"ok  {result.score_us:10.3f} µs"
    return f"{result.status.value}: {result.message.splitlines()[0] if result.message else ''}"[:160]


def _print_summary(summary: dict[str, Any], run: Path) -> None:
    best = summary.get("best")
    if best is None:
        _print("no candidate passed validation")
        return
    _print(
        f"best: candidate #{best['id']} ({best['proposer']}) {_knob_text(best.get('knobs') or {})} "
        f"score {best['score_us']:.3f} µs"
    )
    speedups = summary.get("speedup") or {}
    for key, label in (
        ("vs_initial", "initial kernel"),
        ("vs_baseline", "baseline"),
        ("vs_reference", "reference"),
    ):
        if speedups.get(key):
            _print(
                f"  {speedups[key]:.2f}x faster than the {label}"
                if speedups[key] >= 1
                else f"  {1 / speedups[key]:.2f}x slower than the {label}"
            )
    _print(f"files: {run / 'best.cu'}  {run / 'heatmap.png'}  {run / 'heatmap.svg'}")


class ShowCommand:
    name = "show"

    @classmethod
    def register(cls, sub: Any) -> None:
        parser = sub.add_parser(
            cls.name,
            help="print a run's candidates, its best candidate and its heatmap paths",
            description="Read results/run-NNN/ (finished, running or interrupted) and print it.",
        )
        parser.add_argument("run", type=Path, metavar="RUN_DIR")
        parser.add_argument("--all", action="store_true", help="include sweep screening entries")
        parser.add_argument("--json", action="store_true", help="print machine-readable JSON only")
        parser.set_defaults(handler=cls.run)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        if not args.run.is_dir():
            raise UsageError(f"{args.run} is not a directory")
        summary, entries = read_run(args.run)
        if args.json:
            _print(
                json.dumps(
                    {"summary": summary, "history": [e.model_dump(mode="json") for e in entries]}, indent=2
                )
            )
            return 0
        cases = [c.name for e in entries[:1] for c in e.result.cases if c.kind == "performance"]
        shown = entries if args.all else [e for e in entries if not e.screening]
        hidden = len(entries) - len(shown)
        device = summary.get("device", {}).get("name", "?")
        _print(
            f"{summary.get('run')} — {summary.get('workload')} on {device}"
            + _emulation_note(device, bool(summary.get("emulated")))
            + f" — {summary.get('status')}"
        )
        if shown:
            _print(history_table(shown, cases).to_string(index=False))
        if hidden:
            _print(f"({hidden} sweep screening entries hidden; --all shows them)")
        _print_summary(summary, args.run)
        return 0


COMMANDS = [EvaluateCommand, TuneCommand, ShowCommand]
