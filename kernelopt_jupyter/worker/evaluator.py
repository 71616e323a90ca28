"""Evaluating candidates: the parent-side conductor of compile → launch → validate → time.

An :class:`Evaluator` owns one worker process (and, for a CUDA reference, a second one), the
prepared case data, and the bookkeeping that survives a worker's death: when a candidate crashes
the device, its result says so and the next candidate gets a fresh worker with the workload,
cases and kernels sent again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import ExpressionError
from ..core.inputs import case_variables
from ..core.launch import CandidateLaunch, LaunchDims, resolve_launch
from ..core.physics import Peaks, impossible
from ..core.results import (
    CandidateResult,
    CaseResult,
    DeviceInfo,
    KernelAttributes,
    Status,
    worst,
)
from ..core.scoring import score
from ..core.settings import EvaluationSettings, TimingProtocol
from ..core.tuning_space import KnobValues, compile_key, source_knobs
from ..core.workload import Case, Workload
from .cases import CasePreparer
from .client import WorkerClient, WorkerLost, WorkerReplyError
from .handles import CompileOutcome, KernelHandle
from .protocol import exchange_root
from .references import CudaReferenceRunner


class Evaluator:
    def __init__(self, workload: Workload, settings: EvaluationSettings | None = None) -> None:
        self.workload = workload
        self.settings = settings or EvaluationSettings()
        self.work_dir = Path(tempfile.mkdtemp(prefix="kernelopt-", dir=exchange_root()))
        self.client = WorkerClient(
            self.settings.backend, memcheck=self.settings.memcheck, log_dir=self.work_dir
        )
        self._reference: CudaReferenceRunner | None = None
        self._peaks: Peaks | None = None
        self._cases: CasePreparer | None = None
        self._generation = 0
        self._loaded: set[str] = set()
        self._submitted: dict[str, KernelHandle] = {}
        self._compiled_knobs = source_knobs(workload.tuning, workload.kernel_code())
        self.default_knobs: KnobValues = {
            name: values[0] for name, values in (workload.tuning.knobs if workload.tuning else {}).items()
        }

    def knobs_with_defaults(self, knobs: KnobValues | None) -> KnobValues:
        """Every knob has a value: the one asked for, else its default (the first listed)."""
        return {**self.default_knobs, **(knobs or {})}

    # --- set-up ---------------------------------------------------------------------------------------------
    @property
    def device(self) -> DeviceInfo:
        return self.client.ensure_started()

    @property
    def cases(self) -> CasePreparer:
        if self._cases is None:
            if self.workload.reference.cuda is not None:
                self._reference = CudaReferenceRunner(self.workload, self.settings, self.work_dir)
            self._cases = CasePreparer(
                self.workload,
                self.settings,
                self.work_dir / "cases",
                emulated=self.device.emulated,
                reference_runner=self._reference,
            )
        return self._cases

    @property
    def peaks(self) -> Peaks:
        """The device's measured ceilings (measured once per device, then cached on disk)."""
        if self._peaks is None:
            self._peaks = Peaks.model_validate(self.client.call({"op": "peaks"}, 300))
        return self._peaks

    def _sync_worker(self) -> None:
        """After a worker restart, send the workload again and forget what the old one held."""
        self.client.ensure_started()
        if self.client.generation != self._generation:
            self.client.call(
                {
                    "op": "workload",
                    "workload": self.workload.portable_dict(),
                    "base_dir": str(self.workload.base_dir),
                },
                60,
            )
            self._generation = self.client.generation
            self._loaded.clear()
            for handle in self._submitted.values():
                self.client.call(handle.message(wait=False), 60)

    def preload(self) -> None:
        """Send every case's trials (the secret-seed ones and the re-validation inputs too) to the
        worker, and measure the peaks the physics floor needs, now: set-up time, not the first
        full evaluation's."""
        self._sync_worker()
        settings = self.settings
        trials = settings.trials + (1 if settings.revalidate_after_timing else 0)
        for case in self.workload.cases:
            for trial in range(trials):
                self.ensure_loaded(case, trial)
        if settings.physics_floor:
            _ = self.peaks

    def ensure_loaded(self, case: Case, trial: int) -> str:
        prepared = self.cases.get(case, trial)
        if prepared.key not in self._loaded:
            self.client.call(prepared.load_message(), 120)
            self._loaded.add(prepared.key)
        return prepared.key

    @contextlib.contextmanager
    def screening(self) -> Iterator[None]:
        """Within: one validation trial, no repeat run, no re-validation (a sweep's quick pass).

        Every case is still checked against the reference; the full defences run again on whatever
        is re-timed as a finalist, which is the only thing that can become the best.
        """
        saved = self.settings
        self.settings = saved.model_copy(
            update={"trials": 1, "repeat_check": False, "revalidate_after_timing": False}
        )
        try:
            yield
        finally:
            self.settings = saved

    # --- compiling ---------------------------------------------------------------------------------
    def handle_for(self, source: str, knobs: KnobValues | None = None) -> KernelHandle:
        """Name a compile without starting it; configurations differing only in launch knobs share one."""
        knobs = self.knobs_with_defaults(knobs)
        names = self._compiled_knobs if self.workload.tuning else list(knobs)
        defines = compile_key(knobs, names)
        options = tuple(self.workload.kernel.options)
        entry = self.workload.kernel.entry
        digest = hashlib.sha256(json.dumps([source, entry, options, defines]).encode()).hexdigest()[:24]
        return KernelHandle(digest, source, entry, options, defines)

    def submit(self, source: str, knobs: KnobValues | None = None) -> KernelHandle:
        """Queue a compile in the worker's thread pool and return at once."""
        handle = self.handle_for(source, knobs)
        self._sync_worker()
        if handle.key not in self._submitted:
            self._submitted[handle.key] = handle
            self.client.call(handle.message(wait=False), 60)
        return handle

    def wait_compiled(self, handle: KernelHandle) -> CompileOutcome:
        try:
            self._sync_worker()
            result = self.client.call({"op": "compiled", "key": handle.key}, self.settings.compile_timeout_s)
        except WorkerReplyError as exc:
            return CompileOutcome(False, exc.message, exc.reply.get("time_s"), status=exc.status)
        except WorkerLost as exc:
            return CompileOutcome(False, exc.message, None, status=exc.status)
        return CompileOutcome(
            True, result["log"], result["time_s"], KernelAttributes.model_validate(result["attributes"])
        )

    def forget(self, handle: KernelHandle) -> None:
        """Free a compiled module in the worker (sweeps compile hundreds)."""
        self._submitted.pop(handle.key, None)
        if self.client.alive:
            self.client.call({"op": "forget", "kernels": [handle.key]}, 60)

    # --- evaluating --------------------------------------------------------------------------------
    def evaluate(
        self, source: str, launch: CandidateLaunch | None = None, knobs: KnobValues | None = None
    ) -> CandidateResult:
        handle = self.submit(source, knobs)
        return self.run(handle, self.wait_compiled(handle), launch, knobs)

    def run(
        self,
        handle: KernelHandle,
        compiled: CompileOutcome,
        launch: CandidateLaunch | None = None,
        knobs: KnobValues | None = None,
        *,
        timing: TimingProtocol | bool = True,
    ) -> CandidateResult:
        """Run a compiled kernel on every case. ``timing``: True for the settings' protocol, False for
        none (validation only), or another protocol (a sweep's quick screening)."""
        knobs = self.knobs_with_defaults(knobs)
        result = CandidateResult(
            status=Status.OK,
            backend=self.device.backend,
            device=self.device.name,
            compile_log=compiled.log,
            compile_time_s=compiled.time_s,
            attributes=compiled.attributes,
            knobs=dict(knobs or {}),
            source_hash=handle.source_hash,
        )
        if not compiled.ok:
            result.status, result.message = compiled.status, _first_line(compiled.log)
            return result
        result.cases = self._run_cases("run", handle.key, launch, knobs, timing)
        return self._finish(result)

    def validate(
        self, source: str, launch: CandidateLaunch | None = None, knobs: KnobValues | None = None
    ) -> CandidateResult:
        """Every validation check again, without timing (e.g. after a re-timing that decides)."""
        handle = self.submit(source, knobs)
        return self.run(handle, self.wait_compiled(handle), launch, knobs, timing=False)

    def evaluate_baseline(self, *, timing: TimingProtocol | bool = True) -> CandidateResult | None:
        """Time the spec's baseline (e.g. cuBLAS through ``cupy.matmul``) under the same protocol."""
        if self.workload.baseline is None:
            return None
        result = CandidateResult(
            status=Status.OK, backend=self.device.backend, device=self.device.name, source_hash="baseline"
        )
        result.cases = self._run_cases("baseline", None, None, self.knobs_with_defaults(None), timing)
        return self._finish(result)

    def _finish(self, result: CandidateResult) -> CandidateResult:
        result.status = worst([case.status for case in result.cases])
        failed = next((case for case in result.cases if case.status not in (Status.OK, Status.SKIPPED)), None)
        if failed is not None:
            result.message = f"case {failed.name}: {failed.message}"
        result.score_us = score(result.cases) if result.status == Status.OK else None
        return result

    def _run_cases(
        self,
        op: str,
        kernel_key: str | None,
        launch: CandidateLaunch | None,
        knobs: KnobValues | None,
        timing: TimingProtocol | bool,
    ) -> list[CaseResult]:
        protocol = self.settings.timing if timing is True else (timing or None)
        ordered = sorted(self.workload.cases, key=lambda case: case.kind != "correctness")
        results: list[CaseResult] = []
        for case in ordered:
            statuses = {result.status for result in results}
            if statuses & {Status.CRASHED, Status.TIMEOUT}:
                results.append(self._skipped(case, "not run: an earlier case crashed or hung"))
                continue
            failed = bool(statuses - {Status.OK})
            results.append(self._run_case(op, kernel_key, case, launch, knobs, None if failed else protocol))
        return results

    def _run_case(
        self,
        op: str,
        kernel_key: str | None,
        case: Case,
        launch: CandidateLaunch | None,
        knobs: KnobValues | None,
        timing: TimingProtocol | None,
    ) -> CaseResult:
        sizes = case.sizes_for(self.device.emulated)
        flops, moved = self.cases.work(case)
        base = {"name": case.name, "kind": case.kind, "sizes": sizes, "flops": flops, "bytes": moved}
        try:
            dims = resolve_launch(
                self.workload.launch, case.name, case_variables(case, knobs, self.device.emulated), launch
            )
        except (ExpressionError, KeyError) as exc:
            return CaseResult(status=Status.INVALID, message=f"launch configuration: {exc}", **base)
        settings = self.settings
        try:
            self._sync_worker()
            trials = [self.ensure_loaded(case, trial) for trial in range(settings.trials)]
            revalidate = (
                self.ensure_loaded(case, settings.trials) if settings.revalidate_after_timing else None
            )
            message = {
                "op": op,
                "kernel": kernel_key,
                "case": case.name,
                "kind": case.kind,
                "trials": trials,
                **dims.as_dict(),
                "launch_timeout_s": settings.launch_timeout_s,
                "timing": timing.model_dump() if timing is not None and case.kind == "performance" else None,
                "repeat_check": settings.repeat_check,
                "revalidate": revalidate,
            }
            reply = self.client.call(message, self.backstop_s(timing))
        except WorkerReplyError as exc:
            return CaseResult(status=exc.status, message=exc.message, **base, **_dims(dims))
        except WorkerLost as exc:
            return CaseResult(status=exc.status, message=exc.message, **base, **_dims(dims))
        result = CaseResult.model_validate(reply)
        result.sizes, result.flops, result.bytes = sizes, flops, moved
        if result.timing is not None and settings.physics_floor:
            reason = impossible(result, self.peaks, self.device.l2_cache_bytes)
            if reason is not None:
                result.status, result.message = Status.INVALID, reason
        for trial in range(settings.trials):
            result.flags.extend(f for f in self.cases.get(case, trial).flags if f not in result.flags)
        return result

    def backstop_s(self, timing: TimingProtocol | None) -> float:
        """The parent's last-resort deadline; the worker enforces the real per-launch timeout itself."""
        launches = 4 * (self.settings.trials + 2)
        if timing is not None:
            launches += timing.warmup + timing.max_samples
        return (
            60.0
            + self.settings.launch_timeout_s * launches
            + 12 * (timing.budget_s or 0.0 if timing else 0.0)
        )

    def _skipped(self, case: Case, reason: str) -> CaseResult:
        return CaseResult(
            name=case.name,
            kind=case.kind,
            status=Status.SKIPPED,
            message=reason,
            sizes=case.sizes_for(self.device.emulated),
        )

    def close(self) -> None:
        self.client.close()
        if self._reference is not None:
            self._reference.close()
        if self._cases is not None:
            self._cases.close()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _dims(dims: LaunchDims) -> dict[str, Any]:
    return {"grid": list(dims.grid), "block": list(dims.block), "shared_mem": dims.shared_mem}


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "compilation failed")


def evaluate(
    workload: Workload,
    source: str,
    launch: CandidateLaunch | Mapping[str, Any] | None = None,
    backend: str = "auto",
    *,
    knobs: KnobValues | None = None,
    settings: EvaluationSettings | None = None,
) -> CandidateResult:
    """Evaluate one kernel source on every case of a workload (a fresh worker, closed afterwards)."""
    settings = (settings or EvaluationSettings()).model_copy(update={"backend": backend})
    if launch is not None and not isinstance(launch, CandidateLaunch):
        launch = CandidateLaunch.model_validate(launch)
    with Evaluator(workload, settings) as evaluator:
        return evaluator.evaluate(source, launch, knobs)


__all__: Sequence[str] = ["Evaluator", "evaluate"]
