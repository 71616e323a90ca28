"""The parent's side of the worker: start it, send requests, survive its death.

The notebook (or CLI) process never runs candidate code. It talks to a worker subprocess through
pipes; when the worker dies (segfault, fatal CUDA error) or stops answering (a hung kernel), the
pending request becomes a ``crashed`` / ``timeout`` outcome with the worker's last output, the
process is killed, and the next request starts a fresh worker. ``generation`` counts restarts so
callers know when to send their state (workload, cases, kernels) again.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..core.results import DeviceInfo, Status
from .protocol import ConnectionClosed, encode, read_message

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


class WorkerLost(Exception):
    """The worker died or timed out while handling a request."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class WorkerReplyError(Exception):
    """The worker answered with a failure (compile error, invalid launch, crash it survived...)."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__(reply.get("error", ""))
        self.status = Status(reply.get("status", Status.CRASHED.value))
        self.message = str(reply.get("error", ""))
        self.reply = reply


class WorkerClient:
    def __init__(
        self,
        backend: str = "auto",
        *,
        memcheck: bool = False,
        log_dir: str | Path | None = None,
        startup_timeout_s: float = 180.0,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.backend = backend
        self.memcheck = memcheck
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelopt-worker-"))
        self.startup_timeout_s = startup_timeout_s
        self.extra_env = extra_env or {}
        self.generation = 0
        self.device: DeviceInfo | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._to_worker: int | None = None
        self._from_worker: int | None = None
        self._log_path: Path | None = None

    # --- lifecycle ----------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> DeviceInfo:
        self._discard()
        to_read, to_write = os.pipe()
        from_read, from_write = os.pipe()
        self.generation += 1
        self._log_path = self.log_dir / f"worker-{self.generation}.log"
        command = [
            sys.executable,
            "-m",
            "kernelopt_jupyter.worker",
            "--backend",
            self.backend,
            "--in-fd",
            str(to_read),
            "--out-fd",
            str(from_write),
        ]
        if self.memcheck:
            command.append("--memcheck")
        with open(self._log_path, "wb") as log:
            self._process = subprocess.Popen(
                command,
                pass_fds=(to_read, from_write),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                start_new_session=True,
            )
        os.close(to_read)
        os.close(from_write)
        self._to_worker, self._from_worker = to_write, from_read
        hello = self.call({"op": "hello"}, self.startup_timeout_s)
        self.device = DeviceInfo.model_validate(hello["device"])
        return self.device

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [_PACKAGE_PARENT, env.get("PYTHONPATH", "")] if p)
        env["PYTHONUNBUFFERED"] = "1"
        if self.memcheck:
            from ..backends.cpu import worker_environment

            env.update(worker_environment(True))
        env.update(self.extra_env)
        return env

    def ensure_started(self) -> DeviceInfo:
        if not self.alive or self.device is None:
            return self.start()
        return self.device

    def close(self) -> None:
        if self.alive:
            try:
                self._send({"op": "shutdown"})
                self._receive(5.0)
            except (WorkerLost, OSError):
                pass
        self._discard()

    def _discard(self) -> None:
        process, self._process = self._process, None
        for fd in (self._to_worker, self._from_worker):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_worker = self._from_worker = None
        if process is not None and process.poll() is None:
            _kill_group(process)

    # --- requests ---------------------------------------------------------------------------------------
    def call(self, message: dict[str, Any], timeout_s: float) -> Any:
        """Send one request and return its result; raise :class:`WorkerReplyError` or :class:`WorkerLost`."""
        if message.get("op") != "hello":
            self.ensure_started()
        self._send(message)
        reply = self._receive(timeout_s)
        if not reply.get("ok"):
            if reply.get("fatal"):
                self._reap_after_fatal()
            raise WorkerReplyError(reply)
        return reply.get("result")

    def _send(self, message: dict[str, Any]) -> None:
        assert self._to_worker is not None
        try:
            os.write(self._to_worker, encode(message))
        except (BrokenPipeError, OSError):
            raise self._lost(Status.CRASHED, "the worker process had exited") from None

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        assert self._from_worker is not None
        ready, _, _ = select.select([self._from_worker], [], [], timeout_s)
        if not ready:
            raise self._lost(Status.TIMEOUT, f"the worker did not answer within {timeout_s:g} s")
        try:
            return read_message(self._from_worker)
        except ConnectionClosed:
            raise self._lost(Status.CRASHED, "the worker process died") from None

    def _reap_after_fatal(self) -> None:
        process = self._process
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        self._discard()

    def _lost(self, status: Status, what: str) -> WorkerLost:
        process = self._process
        if process is not None and process.poll() is None:
            _kill_group(process)
        code = process.returncode if process is not None else None
        detail = _describe_exit(code)
        tail = self.log_tail()
        self._discard()
        message = what + (f" ({detail})" if detail else "") + (f"\n{tail}" if tail else "")
        return WorkerLost(status, message)

    def log_tail(self, limit: int = 4000) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        data = self._log_path.read_bytes()[-limit:]
        return data.decode("utf-8", "replace").strip()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return ""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
