"""The exec adapter: a client in any language, driven over JSON lines (docs/exec-protocol.md).

``ExecAdapter`` starts the client's process on the running event loop, writes
commands to its stdin and dispatches the events on its stdout: stream events to
the ``StreamSink`` of their stream, replies to the command waiting for them.
Everything the process writes to stderr is kept in a ring buffer and quoted in
every ``HarnessError``.

Any breach (a bad line, an exit, a command or stream left unanswered) ends the
process: the kit cannot trust it any more, and the runner starts a fresh adapter
for the next case; after a command left unanswered (``Unresponsive``) it gives up on
the client for the run instead. An exit is seen even while a process the client
started holds its stdout open (``_watch_exit``), and reported as one, with its code.
Whatever the process started goes with it: it runs in a session of its own, and
stopping it kills its process group and every process that still carries its
``STREAMCHECK_EXEC_CLIENT`` mark (see ``_leftovers``).

The line format and the event vocabulary are checked by the pure functions of
``_exec_protocol`` (``parse_event``, ``parse_hello``, ``stream_command``), re-exported
here so that every name keeps its import path.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import shlex
import signal
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self, cast

from conformance._adapter import AdapterRequest, StreamCancelled, StreamSink
from conformance._profiles import policy_to_dict
from conformance._result import HarnessError, Unresponsive
from conformance.reference import ClientPolicy
from fake_servers import now
from fake_servers._noise import Source
from pytest_streamcheck.targets._exec_protocol import (
    HELLO_TIMEOUT,
    LAG_EVENT,
    PROTOCOL_VERSION,
    REPLIES,
    ProtocolError,
    Reply,
    deliver,
    encode,
    parse_event,
    parse_hello,
    parse_lag,
    probes_lag,
    stream_command,
)
from pytest_streamcheck.targets._peer import OpenStream, Peer

if TYPE_CHECKING:
    from fake_servers import Ledger

__all__ = [
    "PROTOCOL_VERSION",
    "ExecAdapter",
    "ProtocolError",
    "parse_event",
    "parse_hello",
    "stream_command",
]

LINE_LIMIT = 16 * 1024 * 1024  # bytes in one stdout line; a longer line is a protocol error
COMMAND_TIMEOUT = 10.0  # seconds to answer configure/reset and to read a command (default)
SHUTDOWN_GRACE = 2.0  # seconds a process gets to exit after ``shutdown`` (the protocol's 2 s)
TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL
EXIT_GRACE = 1.0  # after stdout closed: seconds to let the process exit on its own
PIPE_GRACE = 1.0  # after the exit: seconds to read what is left in the pipes
EOF_GRACE = 0.5  # after the exit: seconds its last stdout lines get before it is a breach
EXIT_POLL = 0.1  # seconds between looks at whether the process has exited
# Before the kit calls a silent process hung: seconds its exit gets to be noticed. The
# loop learns of an exit from a watcher thread, which a loaded machine runs late (beside
# 2 burners and the suite, a client that wrote "exiting" and exited was still "running"
# when its case ended, and was reported hung); a process that is truly hung costs this
# once, on a path that is an ERROR anyway.
EXIT_SETTLE = 0.5
TAIL_IN_MESSAGES = 20  # stderr lines quoted in an error message
QUOTE_LIMIT = 200  # characters of an offending line quoted in an error message
# Set in the client's environment to a value of its own, and so inherited by every
# process it starts: what finds a grandchild that left the process group and lost
# its parent (the kit kills what still carries it when the client stops).
CLIENT_MARK = "STREAMCHECK_EXEC_CLIENT"
# How long a case's end waits for the rows a probing process still holds.
LAG_FLUSH_LIMIT = 0.5


def _quote(line: bytes) -> str:
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    return repr(text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "...")


def _exit_text(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


# -- the process shell ------------------------------------------------------------------


@dataclass
class _Failure:
    """Why the process can no longer be used, and the full message once known."""

    reason: str | None  # None: the process went away by itself
    waiting: str  # what the kit was waiting for when it happened
    task: asyncio.Task[str] | None = None
    message: str = ""


class ExecAdapter(Peer):
    """Drives a client process that speaks the exec protocol v1 (docs/exec-protocol.md).

    Start it with ``await adapter.start()`` (the handshake) before reading ``info``;
    every other coroutine also starts it on first use. All coroutines must run on the
    loop that started it. ``aclose()`` always leaves no process and no open pipe.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        hello_timeout: float = HELLO_TIMEOUT,
        command_timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stream_timeout: float | None = None,
        stderr_lines: int = 200,
    ) -> None:
        """Prepares the adapter; nothing is started before ``start()``.

        Args:
            argv: The command and its arguments (run without a shell).
            hello_timeout: Seconds the process has to answer ``hello``.
            command_timeout: Seconds it has to answer ``configure``/``reset`` and to
                read a command from its stdin (None: ``COMMAND_TIMEOUT``).
            env: Variables set for the process on top of the kit's environment.
            stream_timeout: Seconds a stream may run before it must end; None (the
                default) waits as long as the caller does (the runner's case limit).
            stderr_lines: How many of the last stderr lines to keep.
        """
        if not argv:
            raise ValueError("ExecAdapter needs a command")
        self.argv = tuple(argv)
        self.hello_timeout = hello_timeout
        self.command_timeout = COMMAND_TIMEOUT if command_timeout is None else command_timeout
        self.stream_timeout = stream_timeout
        self._env = {**os.environ, **env} if env is not None else None
        self._mark_value = f"{os.getpid()}-{secrets.token_hex(8)}"  # this adapter's alone
        self._stderr: deque[str] = deque(maxlen=stderr_lines)
        super().__init__()
        self._proc: asyncio.subprocess.Process | None = None
        self._readers: tuple[asyncio.Task[None], ...] = ()  # stdout and stderr
        self._failure: _Failure | None = None
        self._closed = False
        self._start_lock = asyncio.Lock()
        self._send_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._probes_lag = False  # the hello said "lag_probe": true
        self._lag_ledger: Ledger | None = None  # where its rows go while a case plays
        self._lag_flushed: asyncio.Future[None] | None = None

    # -- identity ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def stderr_tail(self, lines: int | None = None) -> tuple[str, ...]:
        """The last ``lines`` lines the process wrote to stderr (all that are kept by default).

        Also holds the process's stream-less ``log`` events (``[log] ...``) and the
        kit's notes on events it dropped (``[kit] ...``), in the order they came.
        """
        kept = tuple(self._stderr)
        if lines is None:
            return kept
        return kept[-lines:] if lines > 0 else ()

    def diagnostics(self) -> str:
        """The process's state and its last stderr lines, for an error report."""
        proc = self._proc
        if proc is None:
            state = "not started"
        elif proc.returncode is None:
            state = f"running (pid {proc.pid})"
        else:
            state = f"pid {proc.pid} {_exit_text(proc.returncode)}"
        return f"{self._who}: {state}{self._tail()}"

    @property
    def _who(self) -> str:
        command = shlex.join(self.argv)
        return f"exec client `{command if len(command) <= 120 else command[:117] + '...'}`"

    def _tail(self) -> str:
        lines = self.stderr_tail(TAIL_IN_MESSAGES)
        if not lines:
            return "\n  (nothing on stderr)"
        return "\nlast stderr lines:\n" + "\n".join(f"  | {line}" for line in lines)

    def __repr__(self) -> str:
        return f"<ExecAdapter {self.diagnostics().splitlines()[0]}>"

    # -- the adapter contract ----------------------------------------------------------------
    async def start(self) -> Self:
        """Start the process and shake hands; idempotent.

        Raises:
            HarnessError: the command cannot be run, or it did not answer ``hello``
                correctly within ``hello_timeout`` (the process is then stopped).
        """
        async with self._start_lock:
            if self._closed:
                raise HarnessError(f"{self._who}: the adapter is closed")
            if self._proc is None and self._failure is None:
                await self._launch()
            await self._check_usable()
        return self

    async def configure(self, policy: ClientPolicy) -> None:
        await self.start()
        await self._request({"cmd": "configure", "policy": policy_to_dict(policy)}, "configured")

    async def reset(self) -> None:
        await self.start()
        await self._request({"cmd": "reset"}, "reset")
        self._finished.clear()

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        """Run one stream until the process reports ``done`` or ``error`` for it, or
        delivers its ``cancel_after``-th chunk.

        Cancelling the task sends ``cancel`` (the consumer stops reading).

        Raises:
            HarnessError: the process broke (exit, bad line) or, with ``stream_timeout``
                set, the stream did not end in time.
        """
        await self.start()
        sid = request.stream
        if sid in self._streams:
            raise HarnessError(f"{self._who}: stream {sid!r} is already open")
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = OpenStream(sink, ended, request.request.cancel_after)
        self._streams[sid] = entry
        self._finished.discard(sid)
        try:
            await self._send(stream_command(request))
            async with asyncio.timeout(self.stream_timeout):
                await entry.ended
        except TimeoutError:
            reason = f"stream {sid!r} did not end within {self.stream_timeout:.1f}s"
            raise HarnessError(await self._fail(reason)) from None
        except asyncio.CancelledError:
            if not entry.over and self._failure is None:
                self._write_nowait({"cmd": "cancel", "stream": sid})
            raise
        finally:
            self._streams.pop(sid, None)
            self._finished.add(sid)

    async def offline(self) -> None:
        await self.start()
        await self._send({"cmd": "offline"})

    async def online(self) -> None:
        await self.start()
        await self._send({"cmd": "online"})

    async def aclose(self) -> None:
        """Ask the process to shut down, then terminate or kill it; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            async with self._start_lock:  # never race a handshake in progress
                if self._proc is None:
                    return
                if self._failure is not None:
                    await self._failure_message()
                await self._stop_process(polite=True)
                self._resolve_all(f"{self._who}: the adapter was closed")
        except BaseException:  # cancelled (the caller's time limit): still leave no process
            self._kill_now()
            raise

    def _kill_now(self) -> None:
        """Close the pipes and SIGKILL without waiting; the child watcher reaps it."""
        for task in self._readers:
            task.cancel()
        if self._proc is not None:
            # Not proc.kill(): the transport's close() kills only a process it sees
            # running, and never reaps one the child watcher is about to reap.
            _close_transport(self._proc)
            self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        """SIGKILL what the process started: its group (it leads a session of its own),
        and every live process carrying its mark, its descendants too (a grandchild that
        called setsid and outlived its parent is in neither the group nor its tree)."""
        assert self._proc is not None
        # The group id is the client's pid. While a member lives, the kernel hands that
        # pid to no one else; once none does, there is no group to signal (an unrelated
        # group would need the very pid, which comes round again only when pids wrap).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        for pid in _leftovers(f"{CLIENT_MARK}={self._mark_value}".encode()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    # -- starting ----------------------------------------------------------------------------
    async def _launch(self) -> None:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**(self._env or os.environ), CLIENT_MARK: self._mark_value},
                limit=LINE_LIMIT,
                start_new_session=True,  # its children in its group, away from the kit's
            )
        except OSError as exc:
            raise HarnessError(f"{self._who}: cannot start the command: {exc}") from exc
        self._proc = proc
        assert proc.stdout is not None
        assert proc.stderr is not None
        loop = self._loop = asyncio.get_running_loop()
        stdout = loop.create_task(self._read_stdout(proc.stdout), name=f"exec-stdout:{proc.pid}")
        self._readers = (
            stdout,
            loop.create_task(self._read_stderr(proc.stderr), name=f"exec-stderr:{proc.pid}"),
            loop.create_task(self._watch_exit(proc, stdout), name=f"exec-exit:{proc.pid}"),
        )
        try:
            reply = await self._request(
                {"cmd": "hello", "protocol": PROTOCOL_VERSION}, "hello", self.hello_timeout
            )
            try:
                self._info, unknown = parse_hello(reply, os.path.basename(self.argv[0]))
                self._probes_lag = probes_lag(reply)
            except ProtocolError as exc:
                raise HarnessError(await self._fail(f"broke the protocol: {exc}")) from None
            for name in unknown:
                self._stderr.append(f"[kit] ignored the unknown capability {name!r}")
        except BaseException:  # a failed or cancelled handshake leaves no process behind
            self._trigger("did not finish the handshake (the kit gave up waiting)")
            await self._failure_message()
            raise

    # -- commands and replies ------------------------------------------------------------------
    async def _request(
        self, command: dict[str, Any], reply: Reply, within: float | None = None
    ) -> dict[str, Any]:
        timeout = self.command_timeout if within is None else within
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[reply].append(waiter)
        try:
            await self._send(command)
            async with asyncio.timeout(timeout):
                return await waiter
        except TimeoutError:
            reason = f"did not answer `{command['cmd']}` within {timeout:.1f}s"
            raise Unresponsive(await self._fail(reason)) from None
        finally:
            with contextlib.suppress(ValueError):
                self._replies[reply].remove(waiter)

    async def _send(self, command: Mapping[str, Any]) -> None:
        await self._check_usable()
        assert self._proc is not None
        assert self._proc.stdin is not None
        stdin = self._proc.stdin
        try:
            data = encode(command)
        except (TypeError, ValueError) as exc:
            raise HarnessError(f"{self._who}: cannot send {command['cmd']} as JSON: {exc}") from exc
        async with self._send_lock:
            try:
                stdin.write(data)
                async with asyncio.timeout(self.command_timeout):
                    await stdin.drain()
            except TimeoutError:
                reason = f"did not read its stdin for {self.command_timeout:.1f}s"
                raise Unresponsive(await self._fail(reason)) from None
            except (BrokenPipeError, ConnectionResetError):
                raise HarnessError(await self._fail(None)) from None

    def _write_nowait(self, command: Mapping[str, Any]) -> None:
        """Queue a command without waiting (from a cancelled task); dropped if the pipe is gone."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.write(encode(command))

    async def _check_usable(self) -> None:
        if self._failure is not None:
            raise HarnessError(await self._failure_message())
        if self._closed:
            raise HarnessError(f"{self._who}: the adapter is closed")

    # -- reading the process ---------------------------------------------------------------------
    async def _read_stdout(self, stdout: asyncio.StreamReader) -> None:
        number = 0
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # longer than LINE_LIMIT; readline dropped it
                number += 1
                self._trigger(
                    f"broke the protocol: stdout line {number} is longer than {LINE_LIMIT} bytes"
                )
                continue
            if not line:
                break
            number += 1
            if self._failure is None:
                self._dispatch(number, line)
        if not self._closed:
            self._trigger(None)

    def _dispatch(self, number: int, line: bytes) -> None:
        try:
            event = parse_event(line)
            if event is not None:
                self._route(event)
        except ProtocolError as exc:
            self._trigger(f"broke the protocol: stdout line {number} {exc}: {_quote(line)}")

    def _route(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == LAG_EVENT:
            self._record_lag(event)
            return
        if kind in REPLIES:
            self._hand_reply(kind, event, self._stderr.append)
            return
        sid = event.get("stream")
        entry = self._streams.get(sid) if isinstance(sid, str) else None
        if entry is None:
            self._note_stray(event, self._stderr.append)
            return
        try:
            # After its cancel_after-th chunk the stream is over for the kit, as for the
            # consumer; the process closes the connection and may still report on it.
            entry.over = deliver(entry.sink, event) or entry.consumer_stopped() or entry.over
        except StreamCancelled:
            return  # the consumer stopped reading; the cancel is on its way
        if entry.over and not entry.ended.done():
            entry.ended.set_result(None)

    # -- the process's own lag -----------------------------------------------------------------
    def measure_lag(self, ledger: Ledger | None) -> None:
        """From any thread: while a case plays, have a probing process (``lag_probe`` in
        its hello) report its event loop's lag into ``ledger`` as ``Source.PROCESS`` (a
        hosting loop: docs/exec-protocol.md, "lag"); None stops it."""
        self._lag_ledger = ledger
        loop = self._loop
        if self._probes_lag and loop is not None and not loop.is_closed():
            command = {"cmd": "lag", "on": ledger is not None}
            with contextlib.suppress(RuntimeError):  # the loop stopped meanwhile
                loop.call_soon_threadsafe(self._write_nowait, command)

    async def collect_lag(self) -> None:
        """As a case ends: the rows the process still holds, within LAG_FLUSH_LIMIT."""
        if not self._probes_lag or self._lag_ledger is None or self._failure is not None:
            return
        flushed = self._lag_flushed = asyncio.get_running_loop().create_future()
        self._write_nowait({"cmd": "lag", "flush": True})
        try:
            async with asyncio.timeout(LAG_FLUSH_LIMIT):
                await flushed
        except TimeoutError:
            self._stderr.append(f"[kit] no lag flush within {LAG_FLUSH_LIMIT:.1f}s")
        finally:
            self._lag_flushed = None

    def _record_lag(self, event: Mapping[str, Any]) -> None:
        latest = now()
        rows = parse_lag(event, time.time() - latest, latest)
        ledger = self._lag_ledger
        if ledger is not None:
            for due, woke in rows:
                ledger.record_lag(Source.PROCESS, due, woke)
        flushed = self._lag_flushed
        if event.get("flushed") is True and flushed is not None and not flushed.done():
            flushed.set_result(None)

    async def _watch_exit(
        self, proc: asyncio.subprocess.Process, stdout: asyncio.Task[None]
    ) -> None:
        """An exit is a breach even when no EOF comes (a process the client started
        holds its stdout open): without this, its streams would be reported as hung.
        Its last lines get EOF_GRACE to arrive first."""
        await _exits(proc, math.inf, EXIT_POLL)
        await asyncio.wait([stdout], timeout=EOF_GRACE)
        if not self._closed:
            self._trigger(None)

    async def breakage(self) -> str | None:
        """Why the process can no longer be used, in full (for an exit: its code and last
        stderr lines); None while it can. An exit not yet reported counts at once."""
        if self._failure is None:
            proc = self._proc
            if self._closed or proc is None or not await _exits(proc, EXIT_SETTLE, EXIT_POLL / 10):
                return None
            self._trigger(None)
        return await self._failure_message()

    async def _read_stderr(self, stderr: asyncio.StreamReader) -> None:
        partial = b""
        while chunk := await stderr.read(65536):
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                self._stderr.append(line.decode("utf-8", "replace").rstrip("\r"))
            if len(partial) > 8192:  # a line without end: keep its start
                self._stderr.append(partial[:8192].decode("utf-8", "replace") + "...")
                partial = b""
        if partial:
            self._stderr.append(partial.decode("utf-8", "replace"))

    # -- failing and stopping ------------------------------------------------------------------
    def _trigger(self, reason: str | None) -> None:
        """Declare the process unusable (the first reason wins) and start stopping it."""
        if self._failure is None:
            failure = _Failure(reason, self._waiting_for())
            failure.task = asyncio.get_running_loop().create_task(self._finish_failure(failure))
            self._failure = failure

    async def _fail(self, reason: str | None) -> str:
        """``_trigger``, then the full message, once stderr has been read to its end."""
        self._trigger(reason)
        return await self._failure_message()

    async def _failure_message(self) -> str:
        assert self._failure is not None
        assert self._failure.task is not None
        return await asyncio.shield(self._failure.task)

    async def _finish_failure(self, failure: _Failure) -> str:
        proc = self._proc
        assert proc is not None
        what = failure.reason
        if what is None:  # it went away: give it a moment to exit, to report its code
            if await self._wait_exit(EXIT_GRACE):
                what = _exit_text(cast(int, proc.returncode))
            else:
                what = "closed its stdout but kept running (the kit stopped it)"
        elif proc.returncode is None:
            what += " (the kit stopped it)"
        await self._stop_process(polite=False)
        failure.message = f"{self._who} {what}{failure.waiting}{self._tail()}"
        self._resolve_all(failure.message)
        return failure.message

    async def _stop_process(self, *, polite: bool) -> None:
        """End the process (``shutdown`` first if ``polite``), reap it, close every pipe."""
        proc = self._proc
        if proc is None:
            return
        if polite and proc.returncode is None:
            self._write_nowait({"cmd": "shutdown"})
        if proc.stdin is not None:
            proc.stdin.close()  # EOF on stdin also tells it to go
        if not polite or not await self._wait_exit(SHUTDOWN_GRACE):
            await self._terminate(proc)
        # Its children had the shutdown grace to go with it; what is left is killed
        # (before the pipes are drained: a grandchild may be holding them open).
        self._kill_leftovers()
        await self._close_pipes(proc)

    async def _terminate(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        if not await self._wait_exit(TERM_GRACE):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def _wait_exit(self, seconds: float) -> bool:
        assert self._proc is not None
        try:
            async with asyncio.timeout(seconds):
                await self._proc.wait()
        except TimeoutError:
            return False
        return True

    async def _close_pipes(self, proc: asyncio.subprocess.Process) -> None:
        readers = [t for t in self._readers if t is not asyncio.current_task()]
        if readers:
            _, pending = await asyncio.wait(readers, timeout=PIPE_GRACE)
            for task in pending:  # a grandchild holds the pipe open
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if proc.stdin is not None:
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(PIPE_GRACE):
                    await proc.stdin.wait_closed()
        _close_transport(proc)


def _leftovers(mark: bytes) -> set[int]:
    """Live processes (zombies aside) whose environment holds ``mark``, and their
    descendants by the parent chain (a child that cleared its environment).

    Read from /proc, so Linux only; elsewhere the process group is all the kit kills.
    A process of another user, or one that exits meanwhile, is skipped.
    """
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return set()
    parents = {pid: parent for pid in pids if (parent := _live_parent(pid)) is not None}
    found = {pid for pid in parents if _carries(pid, mark)}
    grew = True
    while grew:  # add children of what was found until nothing new turns up
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    found.discard(os.getpid())
    return found


def _live_parent(pid: int) -> int | None:
    """The parent pid of a live process; None for a zombie or a process now gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # After the command name, in parentheses (which may hold anything): state, ppid.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 2 or fields[0] == b"Z":
        return None
    return int(fields[1])


def _carries(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:  # another user's process, or gone
        return False


def _close_transport(proc: asyncio.subprocess.Process) -> None:
    # The transport closes itself once the exit and both pipes' ends are seen; a pipe
    # still held open by a grandchild would keep it (and a ResourceWarning) alive.
    transport = getattr(proc, "_transport", None)
    if transport is not None and not transport.is_closing():
        transport.close()


async def _exits(proc: asyncio.subprocess.Process, within: float, every: float) -> bool:
    """Whether ``proc`` has exited, or does within ``within`` seconds, looked at every
    ``every``. Polled: asyncio has no event for the exit alone (``proc.wait()`` also
    waits for every pipe to close, which a process the client left behind prevents)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while proc.returncode is None and loop.time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(every)
    return proc.returncode is not None
