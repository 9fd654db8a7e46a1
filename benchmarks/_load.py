"""A defined load for benchmarks: CPU burners and a command looping beside the measured runs.

Every process started here runs in its own process group (so a Ctrl-C at the terminal
reaches only the script, which then stops them itself), is stopped by PID (SIGTERM to
its group, then SIGKILL, always waited), and on Linux is also killed by the kernel if
the script dies without cleaning up (PR_SET_PDEATHSIG). Nothing here uses threads: the
caller polls (`Beside.tick`, `LoadSampler.tick`) while it waits for its own work.

    with stop_signals():              # SIGTERM/SIGHUP raise KeyboardInterrupt, like Ctrl-C
        load = Load(burners=2, beside="python -m pytest -q tests/test_loader.py")
        try:
            load.start()
            ...                       # call load.tick() while waiting
        finally:
            load.stop()               # signals are ignored while it cleans up
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import time

BURNER_CODE = "while True: pass"
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1

try:
    _libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover - no libc to load
    _libc = None


def _child_setup(parent: int):
    """Runs in the child between fork and exec: unblock signals, die with the parent."""

    def setup():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)

    return setup


@contextlib.contextmanager
def signals_blocked():
    """Hold Ctrl-C/SIGTERM back while a process is started and recorded (no leak between)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def signals_ignored():
    """Let cleanup finish: a second Ctrl-C must not leave a burner behind."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def ignore_stop_signals() -> None:
    """From now on (the process is ending), ignore SIGINT, SIGTERM and SIGHUP."""
    for s in _STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


@contextlib.contextmanager
def stop_signals():
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so `finally` blocks run."""

    def raise_interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    old = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    # Also when started with SIGINT ignored (a background job of a non-interactive shell).
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def spawn(argv: list[str], **kwargs) -> subprocess.Popen:
    """Start argv in its own process group (pgid == pid), tied to this process's life."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.DEVNULL)
    kwargs.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen(argv, process_group=0, preexec_fn=_child_setup(os.getpid()), **kwargs)


def stop_group(proc: subprocess.Popen, grace: float = TERM_GRACE) -> int | None:
    """SIGTERM the process group led by proc.pid, SIGKILL it after `grace`, wait for it.

    Returns the leader's exit code. The whole group is signalled (children of a pytest
    run or of the beside command go too); the leader is reaped by PID.
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    # The leader may be gone while others in its group still run: SIGKILL the group anyway.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Beside:
    """A command run in a loop beside the measured runs, restarted whenever it ends."""

    MIN_PERIOD = 1.0  # a command that ends faster than this is restarted only after it

    def __init__(self, command: str) -> None:
        self.command = command
        self.argv = shlex.split(command)
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.ended_at: float | None = None
        self.rounds: list[dict] = []  # one per finished round: exit code, seconds
        self.pids: list[int] = []

    def start(self) -> None:
        with signals_blocked():
            self.proc = spawn(self.argv)
            self.pids.append(self.proc.pid)
        self.started_at = time.monotonic()
        self.ended_at: float | None = None

    def tick(self) -> None:
        """Restart the command if it ended (called from the waiting loop)."""
        if self.proc is None or self.proc.poll() is None:
            return
        now = time.monotonic()
        if self.ended_at is None:
            self.ended_at = now
        if now - self.started_at < self.MIN_PERIOD:
            return  # a command that fails fast is not restarted in a tight loop
        took = self.ended_at - self.started_at
        self.rounds.append(
            {"pid": self.proc.pid, "exit_code": self.proc.returncode, "seconds": took}
        )
        # Its group may still hold children of the ended round: stop them before restarting.
        stop_group(self.proc, grace=0.5)
        self.start()

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        pid = self.proc.pid
        finished = self.proc.poll() is not None
        took = time.monotonic() - self.started_at
        code = stop_group(self.proc)
        self.rounds.append(
            {"pid": pid, "exit_code": code, "seconds": took, "stopped": not finished}
        )
        self.proc = None
        return code

    def figures(self) -> dict:
        done = [r for r in self.rounds if not r.get("stopped")]
        return {
            "command": self.command,
            "rounds_started": len(self.pids),
            "rounds_completed": len(done),
            "completed_exit_codes": _count(r["exit_code"] for r in done),
        }


class LoadSampler:
    """Samples the 1-minute load average every `period` seconds while ticked."""

    def __init__(self, period: float = 5.0) -> None:
        self.period = period
        self.samples: list[float] = []
        self._next = 0.0

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now >= self._next:
            self.samples.append(os.getloadavg()[0])
            self._next = now + self.period


class Load:
    """N CPU-bound burner processes, and optionally a command looping beside them."""

    def __init__(self, burners: int = 0, beside: str | None = None) -> None:
        self.n_burners = burners
        self.burners: list[subprocess.Popen] = []
        self.beside = Beside(beside) if beside else None
        self.sampler = LoadSampler()

    def start(self) -> None:
        for _ in range(self.n_burners):
            with signals_blocked():
                self.burners.append(spawn([sys.executable, "-c", BURNER_CODE]))
        if self.burners:
            print(
                f"burners started, PIDs: {' '.join(str(b.pid) for b in self.burners)}", flush=True
            )
        if self.beside:
            self.beside.start()
            print(f"beside started, PID {self.beside.proc.pid}: {self.beside.command}", flush=True)
        self.sampler.tick(force=True)

    def tick(self) -> None:
        if self.beside:
            self.beside.tick()
        self.sampler.tick()

    def stop(self) -> None:
        """Stop everything by PID; safe to call more than once, never interrupted."""
        with signals_ignored():
            try:
                self._stop_burners()
            finally:
                if self.beside and self.beside.proc is not None:
                    pid = self.beside.proc.pid
                    code = self.beside.stop()
                    print(f"beside stopped, PID {pid} (exit code {code})", flush=True)

    def _stop_burners(self) -> None:
        for b in self.burners:
            if b.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(b.pid, signal.SIGTERM)  # all at once, then wait for each
        codes = [stop_group(b) for b in self.burners]
        if self.burners:
            pids = " ".join(f"{b.pid}({c})" for b, c in zip(self.burners, codes, strict=True))
            print(f"burners stopped, PID(exit code): {pids}", flush=True)
        left = [b.pid for b in self.burners if group_alive(b.pid)]
        if left:  # never expected: said loudly so nobody trusts a figure taken beside one
            print(f"WARNING: burner process groups still alive: {left}", flush=True)
        self.burners = []

    def figures(self) -> dict:
        return {
            "burners": self.n_burners,
            "beside": self.beside.figures() if self.beside else None,
        }


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out
