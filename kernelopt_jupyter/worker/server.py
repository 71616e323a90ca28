"""The worker process: owns the device, compiles and runs candidates, answers the client.

Started by :class:`~kernelopt_jupyter.worker.client.WorkerClient` as
``python -m kernelopt_jupyter.worker --backend auto --in-fd R --out-fd W``. Candidate code only
ever runs here, so an illegal address, a trap, a segfault or a hung kernel costs this process and
nothing else. After a failure that leaves the device unusable the reply says ``fatal`` and the
process exits; the client starts a fresh one.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..backends import create_backend
from ..backends.base import Backend, CompiledKernel, CompileFailed, CompileRequest, LaunchFailed
from ..core.callables import resolve_callable
from ..core.compare import compare_output
from ..core.launch import LaunchDims
from ..core.physics import cached_peaks, remember_peaks
from ..core.results import Status
from ..core.settings import TimingProtocol
from ..core.workload import Tolerance, Workload
from .baseline import baseline_invoker, baseline_protocol
from .protocol import ConnectionClosed, read_message, write_message
from .runner import CaseRunner, LoadedCase, RunRequest, interleaved_timings, kernel_invoker


class Worker:
    def __init__(self, backend: Backend, compile_threads: int) -> None:
        self.backend = backend
        self.workload: Workload | None = None
        self.kernels: dict[str, Future[CompiledKernel]] = {}
        self.cases: dict[str, LoadedCase] = {}
        self.pool = ThreadPoolExecutor(max_workers=compile_threads, thread_name_prefix="compile")

    # --- operations -------------------------------------------------------------------------------
    def op_hello(self, _message: dict[str, Any]) -> Any:
        return {"device": self.backend.device_info().model_dump(mode="json"), "pid": os.getpid()}

    def op_peaks(self, _message: dict[str, Any]) -> Any:
        info = self.backend.device_info()
        if info.emulated:  # cheap to measure, and the host's load changes: never cached
            return self.backend.measure_peaks().model_dump()
        key = f"v3:{info.backend}:{info.name}:{info.compute_capability}"
        peaks = cached_peaks(key)
        if peaks is None:
            peaks = self.backend.measure_peaks()
            remember_peaks(key, peaks)
        return peaks.model_dump()

    def op_workload(self, message: dict[str, Any]) -> Any:
        workload = Workload.model_validate(message["workload"])
        self.workload = workload.bind_location("<worker>", Path(message["base_dir"]))
        return {}

    def op_load_case(self, message: dict[str, Any]) -> Any:
        xp = self.backend.xp
        arrays = {name: xp.asarray(np.load(path)) for name, path in message["arrays"].items()}
        reference = {name: np.load(path) for name, path in message.get("reference", {}).items()}
        shapes = {
            name: (tuple(shape), np.dtype(dtype)) for name, (shape, dtype) in message["output_shapes"].items()
        }
        self._warm_comparisons(shapes, reference)
        self.cases[message["key"]] = LoadedCase(
            message["case"], message["trial"], arrays, message["scalars"], shapes, reference
        )
        return {}

    def _warm_comparisons(self, shapes: dict[str, Any], reference: dict[str, np.ndarray]) -> None:
        """Compile the array library's comparison kernels now, on zero-filled stand-ins of the same
        shapes and dtypes (never the reference itself), so the first candidate's validation is not
        charged seconds of JIT compilation."""
        xp = self.backend.xp
        for name, (shape, dtype) in shapes.items():
            expected = reference.get(name)
            reference_dtype = expected.dtype if expected is not None else np.dtype(np.float64)
            got = xp.zeros(shape, dtype=dtype)  # full size: large reductions take other code paths
            zeros = xp.zeros(shape, dtype=reference_dtype)
            compare_output(name, got, zeros, Tolerance(), xp)  # the quick path for passing outputs
            compare_output(name, xp.ones(shape, dtype=dtype), zeros, Tolerance(), xp)  # the general one
            xp.array_equal(got.view(xp.uint8), got.view(xp.uint8))

    def op_forget(self, message: dict[str, Any]) -> Any:
        for key in message.get("cases", []):
            self.cases.pop(key, None)
        for key in message.get("kernels", []):
            self.kernels.pop(key, None)
        return {}

    def op_compile(self, message: dict[str, Any]) -> Any:
        request = CompileRequest(
            source=message["source"],
            entry=message["entry"],
            options=tuple(message.get("options", ())),
            defines=dict(message.get("defines", {})),
            filename=message.get("filename", "candidate.cu"),
        )
        key = message["key"]
        if key not in self.kernels:
            self.kernels[key] = self.pool.submit(self.backend.compile, request)
        if message.get("wait", True):
            return self.op_compiled({"key": key})
        return {"queued": True}

    def op_compiled(self, message: dict[str, Any]) -> Any:
        kernel = self.kernels[message["key"]].result()
        return {
            "attributes": kernel.attributes.model_dump(mode="json"),
            "log": kernel.compile_log,
            "time_s": kernel.compile_time_s,
        }

    def op_run(self, message: dict[str, Any]) -> Any:
        runner, request = self._run_request(message)
        kernel = self.kernels[message["kernel"]].result()
        reason = self.backend.check_launch(kernel, request.dims)
        if reason is not None:
            raise LaunchFailed(Status.INVALID, reason)
        return runner.run(request, kernel_invoker(runner, kernel, request.dims)).model_dump(mode="json")

    def op_interleave(self, message: dict[str, Any]) -> Any:
        """Time several compiled kernels A/B/A/B on one case (each with its own launch)."""
        runner, request = self._run_request(message)
        invokers = []
        for key, dims in zip(message["kernels"], message["launches"], strict=True):
            launch = LaunchDims(tuple(dims["grid"]), tuple(dims["block"]), int(dims["shared_mem"]))
            invokers.append(kernel_invoker(runner, self.kernels[key].result(), launch))
        assert request.timing is not None
        timings = interleaved_timings(
            runner,
            invokers,
            request.trials[0],
            request.timing,
            int(message.get("rounds", 4)),
            request.launch_timeout_s,
        )
        return {"timings": [t.model_dump(mode="json") for t in timings]}

    def op_baseline(self, message: dict[str, Any]) -> Any:
        runner, request = self._run_request(message)
        assert self.workload is not None and self.workload.baseline is not None
        function = resolve_callable(self.workload.baseline.python, self.workload.base_dir)
        request.timing = baseline_protocol(request.timing)
        return runner.run(request, baseline_invoker(runner, function)).model_dump(mode="json")

    def op_outputs(self, message: dict[str, Any]) -> Any:
        """Run a (reference) kernel once on a case and save its outputs as ``.npy`` files."""
        runner, request = self._run_request(message)
        kernel = self.kernels[message["kernel"]].result()
        case = request.trials[0]
        buffers = runner.fresh_buffers(case)
        self.backend.launch(kernel, request.dims, runner.kernel_arguments(case, buffers))
        self.backend.synchronize(request.launch_timeout_s)
        paths = {}
        for output in runner.workload.outputs:
            path = Path(message["directory"]) / f"{output.name}.npy"
            np.save(path, _to_host(buffers[output.name]))
            paths[output.name] = str(path)
        return {"outputs": paths}

    def _run_request(self, message: dict[str, Any]) -> tuple[CaseRunner, RunRequest]:
        assert self.workload is not None, "the workload must be sent before running"
        timing = message.get("timing")
        revalidate = message.get("revalidate")
        request = RunRequest(
            case=message["case"],
            kind=message["kind"],
            trials=[self.cases[key] for key in message["trials"]],
            dims=LaunchDims(tuple(message["grid"]), tuple(message["block"]), int(message["shared_mem"])),
            launch_timeout_s=float(message["launch_timeout_s"]),
            timing=TimingProtocol.model_validate(timing) if timing else None,
            repeat_check=bool(message.get("repeat_check", False)),
            revalidate=self.cases[revalidate] if revalidate else None,
        )
        return CaseRunner(self.backend, self.workload), request


def _to_host(array: Any) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)


def serve(worker: Worker, in_fd: int, out_fd: int, before_exit: Callable[[], None] = lambda: None) -> None:
    out = os.fdopen(out_fd, "wb")
    while True:
        try:
            message = read_message(in_fd)
        except ConnectionClosed:
            before_exit()
            return
        op = message.get("op", "")
        if op == "shutdown":
            before_exit()  # the client may kill this process as soon as it has the reply
            write_message(out, {"ok": True, "result": {}})
            return
        handler = getattr(worker, f"op_{op}", None)
        fatal = False
        try:
            if handler is None:
                raise ValueError(f"unknown operation {op!r}")
            reply: dict[str, Any] = {"ok": True, "result": handler(message)}
        except CompileFailed as exc:
            reply = {
                "ok": False,
                "status": Status.COMPILE_ERROR.value,
                "error": exc.log,
                "time_s": exc.compile_time_s,
            }
        except LaunchFailed as exc:
            fatal = exc.fatal
            reply = {"ok": False, "status": exc.status.value, "error": exc.message, "fatal": fatal}
        except Exception as exc:
            status, message_text, fatal = worker_error(worker.backend, exc)
            reply = {"ok": False, "status": status.value, "error": message_text, "fatal": fatal}
        write_message(out, reply)
        if fatal:
            out.flush()
            os._exit(3)


def worker_error(backend: Backend, exc: Exception) -> tuple[Status, str, bool]:
    """Classify an unexpected exception: the backend knows its own error statuses."""
    classified = backend.classify_error(exc)
    if classified is not None:
        return classified.status, classified.message, classified.fatal
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Status.CRASHED, f"{detail}\n{traceback.format_exc(limit=6)}", True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kernelopt-worker")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--memcheck", action="store_true")
    parser.add_argument("--compile-threads", type=int, default=min(16, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    options = {"memcheck": True} if args.memcheck else {}
    try:
        backend = create_backend(args.backend, **options)
    except Exception as exc:
        with os.fdopen(args.out_fd, "wb") as out:
            write_message(
                out,
                {
                    "ok": False,
                    "status": Status.CRASHED.value,
                    "error": f"backend {args.backend!r} failed to start: {exc}",
                    "fatal": True,
                },
            )
        sys.exit(2)
    serve(Worker(backend, args.compile_threads), args.in_fd, args.out_fd, _profiler())


def _profiler() -> Callable[[], None]:
    """With ``KERNELOPT_WORKER_PROFILE=DIR``, profile this worker into ``DIR/worker-PID.prof``.

    A measuring aid for ``benchmarks/``: the worker's own time is where a sweep spends most of its.
    """
    directory = os.environ.get("KERNELOPT_WORKER_PROFILE")
    if not directory:
        return lambda: None
    import cProfile

    profile = cProfile.Profile()
    profile.enable()

    def dump() -> None:
        profile.disable()
        Path(directory).mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(Path(directory) / f"worker-{os.getpid()}.prof"))

    return dump
