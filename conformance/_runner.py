"""Play a case through an adapter and turn the evidence into a verdict; no pytest.

``run_suite`` runs the catalog (or a selection) against an adapter factory from a plain
script or any test runner, as ``trio.testing.check_one_way_stream`` runs against a
stream factory; the pytest plugin is a shell over ``SuiteRunner``, one item per case.

The adapter lives on a private event loop in its own thread, so a client that
blocks its loop cannot hang the suite: the calling thread waits with a hard time
limit, reports ERROR, and the next case gets a fresh loop and adapter. Two breakages
end the run's cases at once instead (each later case is an ERROR saying why): a loop
blocked by a synchronous call (the kit cannot take a thread back), and a client that
cannot be started again after it broke.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import fnmatch
import gc
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, TypeVar

from conformance._adapter import AdapterInfo, AdapterRequest, ClientAdapter, StreamSink
from conformance._case import Case, Outcome, SetupFailed, StreamRequest, Verdict, all_cases
from conformance._checks import name_endings
from conformance._evidence import DeliveryLog, Evidence
from conformance._json import fields_json
from conformance._profiles import Profile, ProfileError, Timing, get_profile
from conformance._timing import CLIENT_SOURCE, SDK_LOOP_SOURCE, Noise
from conformance.reference._config import ClientPolicy
from fake_servers import FakeServer, FaultProxy, Ledger, Scenario, now
from fake_servers._noise import LagProbe

__all__ = [
    "DEFAULT_PROFILES",
    "SKIPS",
    "CaseResult",
    "Gate",
    "HarnessError",
    "LoopBlocked",
    "RejudgeBudget",
    "Rejudged",
    "SkipKind",
    "Solo",
    "SuiteRunner",
    "run_suite",
    "select_cases",
]

T = TypeVar("T")
POLL = 0.002  # seconds between looks at the ledger and deliveries while waiting
SETTLE = 0.5  # seconds to let the server record the end of in-flight attempts
# Limits on adapter commands sit above the exec adapter's own (10 s), so its
# richer message (with the client's stderr) is the one users see.
COMMAND_LIMIT = 15.0
COMMAND_MARGIN = 5.0  # above an adapter's own ``reset_limit``, for the same reason
CLOSE_LIMIT = 5.0
# A loop that runs no callback at all for this long is blocked by a synchronous call,
# not busy: the worst lag a loaded machine gives the kit's loops is far below it.
LOOP_BLOCK_LIMIT = 10.0
BEAT_INTERVAL = 0.25  # seconds between the heartbeats the adapter's loop runs
WATCH_SLICE = 0.25  # seconds between looks at the heartbeat while waiting on the loop
QUIET_BEAT = 1.0  # after a timeout, a loop silent this long is watched until it is judged
BLOCKED = (
    "the kit cannot take a blocked thread back (it is left as a daemon thread, which "
    "does not keep the run from ending)"
)
# Re-judging a case the measured noise left undecidable: every duration of its policy
# times each factor in turn (same ratios, so the same relations are judged, with more
# room for noise), while the run's re-judging budget lasts (docs/timing.md). A client
# that cannot be configured is re-judged at its own scale, up to FIXED_RETRIES times (a
# loaded CI left 3 of a fixed 1 s client's 6 BACKOFF cases undecidable after one). x2
# first: the herd's statistic, undecidable at x1 in most quiet runs, settles there (6 s
# for the case instead of 10 s at x4; the catalog 19.6-22.4 s quiet and 30.6-40.0 s
# under 4 CPU burners, against 21.0-27.1 s and 41.9-45.7 s with (4, 12)). x30 last: beside
# 2 CPU burners and the kit's own suite a server loop lagging 175 ms left a fixed delay's
# jitter case undecidable at x12 (its waits' could-be spread, 671 ms, above 30 % of the
# 1.8 s span); the noise stays as the span grows, so at x30 (4.5 s) it is a FAIL.
REJUDGE_FACTORS = (2.0, 4.0, 12.0, 30.0)
FIXED_RETRIES = 2
REJUDGE_BUDGET = 120.0  # seconds of re-judging per run, in all
# GET cases run under the first profile covering GET, POST cases the first covering POST.
# The plugin's --streamcheck-profile default says the same (a kit test holds them equal).
DEFAULT_PROFILES = ("seed-eventsource", "seed-fetch")


CASE_TIMEOUT = 60.0  # seconds one case may take before it is an ERROR
LIMIT_GROWTH = 2.0  # a re-judging try's limit, against its first try's pace

# Why a case was not played (UNSUPPORTED), and whether its rule applies to the client:
# a missing capability or a policy the client cannot take leaves an applicable rule
# unjudged; a transport no profile covers, or a rule the profile excludes, does not apply.
SkipKind = Literal["capability", "untunable", "transport", "profile"]
SKIPS: dict[SkipKind, bool] = {  # kind -> the rule applies (it went unjudged)
    "capability": True,
    "untunable": True,
    "transport": False,
    "profile": False,
}


class RunSettings(TypedDict, total=False):
    """What every runner of one run is made with (``Lanes`` hands them to each lane)."""

    timing: Timing | None
    seed: int
    case_timeout: float
    wire_format: str | None


class HarnessError(Exception):
    """The harness or the adapter broke; the case is ERROR, never FAIL."""


class LoopBlocked(HarnessError):
    """The adapter blocked its event loop; the kit cannot take that thread back."""


@dataclass(frozen=True)
class Rejudged:
    """One undecidable try of a case, before it was judged again (alone, or at a coarser
    scale)."""

    factor: float  # durations times this, against the profile's timing
    observed: str
    noise: str  # the measured lag's headline
    beside: bool = False  # it played beside other cases (lanes): played again alone

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    verdict: Verdict
    profile: str | None
    timing: Timing
    outcome: Outcome | None = None
    reason: str = ""  # why UNSUPPORTED, ERROR or INCONCLUSIVE
    evidence: Evidence | None = None
    duration: float = 0.0
    factor: float = 1.0  # the scale the verdict was judged at, against the profile's timing
    rejudged: tuple[Rejudged, ...] = ()  # the undecidable tries before it
    skip: SkipKind | None = None  # why UNSUPPORTED

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            **self.case.to_json(),
            "verdict": self.verdict.value,
            "profile": self.profile,
            "timing": self.timing,
            "reason": self.reason,
            "skip": self.skip,
            "duration": round(self.duration, 4),
            "factor": self.factor,
            "rejudged": [r.to_json() for r in self.rejudged],
        }
        if self.outcome is not None:
            data.update(
                expected=self.outcome.expected,
                observed=self.outcome.observed,
                details=list(self.outcome.details),
            )
            if self.outcome.figure is not None:
                data["figure"] = self.outcome.figure.to_json()
        if self.evidence is not None:
            data["noise"] = self.evidence.noise.report()
        if self.evidence is not None:
            data["timeline"] = self.evidence.timeline()
            data["chart"] = self.evidence.chart()
            data["evidence"] = self.evidence.to_json()
        return data


class RejudgeBudget:
    """Seconds of re-judging left to a run, shared by every runner (lane) it has."""

    def __init__(self, seconds: float = REJUDGE_BUDGET) -> None:
        self.left = seconds

    def spend(self, seconds: float) -> None:
        self.left -= seconds

    @property
    def spent(self) -> bool:
        return self.left <= 0


class Gate(Protocol):
    """How a runner shares the machine with runners beside it (``conformance._lanes``)."""

    def alone(self) -> AbstractContextManager[None]:
        """Entered around a re-judging try: no other case plays while it is held."""

    def beside(self) -> bool:
        """Whether the case's try so far played while another case played too."""


class Solo:
    """The gate of a runner that plays by itself: always alone."""

    def alone(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def beside(self) -> bool:
        return False


class _Heartbeat:
    """When the adapter's loop last ran a callback of the kit's (read from any thread).

    A busy loop still beats, late by its lag; a loop that misses every beat for
    LOOP_BLOCK_LIMIT is stuck in a synchronous call and will not come back.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.last = time.monotonic()
        loop.call_soon_threadsafe(self._beat)

    def _beat(self) -> None:
        self.last = time.monotonic()
        self._loop.call_later(BEAT_INTERVAL, self._beat)

    def silent_for(self) -> float:
        return time.monotonic() - self.last


class _Context:
    """The ``CaseContext`` a case plays against; lives on the runner's loop."""

    def __init__(
        self, runner: SuiteRunner, policy: ClientPolicy, transport: Literal["get", "post"]
    ) -> None:
        self.policy = policy
        self.transport = transport
        self.server = runner.server
        self.proxy = runner.proxy
        self.ledger: Ledger = runner.server.ledger
        self.deliveries = DeliveryLog()
        self._adapter = runner.adapter
        self._streams: dict[str, tuple[asyncio.Task[None], StreamSink]] = {}
        self._started: dict[str, float] = {}  # when each stream was started
        self._overdue: dict[str, float] = {}  # streams waited on in vain, and for how long
        self.failures: list[str] = []  # adapter exceptions: harness errors
        self.ran_out = False  # a wait ended at its deadline, what it waited for not there

    def start(self, request: StreamRequest) -> None:
        sink = StreamSink(self.deliveries, request.stream)
        adapter_request = AdapterRequest(self.proxy.url + request.path, request)
        task = asyncio.get_running_loop().create_task(self._run(adapter_request, sink))
        self._streams[request.stream] = (task, sink)
        self._started[request.stream] = now()

    async def _run(self, request: AdapterRequest, sink: StreamSink) -> None:
        try:
            await self._adapter.stream(request, sink)
        except asyncio.CancelledError:
            raise
        except HarnessError as exc:  # the adapter's own account (an exec client's stderr)
            self.failures.append(str(exc))
        except Exception as exc:  # the adapter broke, not the client
            self.failures.append(
                f"adapter.stream raised {type(exc).__name__}: {exc}\n"
                + "".join(traceback.format_exception(exc)[-3:])
            )

    async def wait_ended(self, stream: str, timeout: float) -> bool:
        ended = await self.wait_until(
            lambda: self.deliveries.ended(stream) or self._gone(stream), timeout
        )
        if not ended:
            self._overdue.setdefault(stream, timeout)
        return ended

    def hung(self) -> str | None:
        """Why the adapter, not the client, is to blame for a stream the case waited on.

        A case waits with ``wait_ended`` only for a stream it expects to end. When that
        wait ran out and, as the case ends, the adapter's ``stream()`` call is still
        running, nothing at all (not even a state) was delivered for the stream, and no
        request reached the proxy or the server after it was started, then the client
        never acted on it: the adapter hung. Anything short of that (a stream it
        cancelled or never waited on, a client that sent a request or reported a state
        and then went quiet) is the client's to answer for, and its check judges it.
        """
        for stream, waited in self._overdue.items():
            if self._never_acted_on(stream):
                # One first line for every case it happens to: the summary groups by it.
                return (
                    f"the adapter hung on stream {stream!r}: its adapter.stream() call never "
                    "returned, delivered nothing and sent no request\n"
                    f"The case waited {waited:.2f}s for the stream to end; when the case "
                    "ended, the call was still running, nothing (no chunk, state, done or "
                    "error) had been delivered for the stream, and no request had reached "
                    "the proxy or the server since it was started. The adapter or its "
                    "client hung: this is not judged as a failure of the client"
                )
        return None

    def _never_acted_on(self, stream: str) -> bool:
        entry, since = self._streams.get(stream), self._started.get(stream)
        if entry is None or since is None or entry[0].done():
            return False
        if any(d.stream == stream for d in self.deliveries.all()):
            return False
        requested = any(a.arrived_at >= since for a in self.ledger.attempts())
        return not requested and not any(c.opened_at >= since for c in self.ledger.connections())

    def _gone(self, stream: str) -> bool:
        entry = self._streams.get(stream)
        return entry is not None and entry[0].done()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Whether ``predicate`` came true within ``timeout``; a wait that ran out says so
        (``ran_out``: the overload rule reads it)."""
        met = await self._poll(predicate, timeout)
        self.ran_out = self.ran_out or not met
        return met

    async def settle(self) -> None:
        """Let the server record the end of in-flight attempts: the kit's own tidying,
        not one of the case's waits."""
        await self._poll(lambda: all(a.finished for a in self.ledger.attempts()), SETTLE)

    async def _poll(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = now() + timeout
        while not predicate():
            if now() >= deadline or self.failures:
                return predicate()
            await asyncio.sleep(POLL)
        return True

    async def hold(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def cancel(self, stream: str) -> None:
        task, sink = self._streams[stream]
        sink.cancel()
        task.cancel()
        await asyncio.wait([task], timeout=2.0)

    async def offline(self) -> None:
        await self._adapter.offline()

    async def online(self) -> None:
        await self._adapter.online()

    async def close(self) -> None:
        tasks = [task for task, _ in self._streams.values() if not task.done()]
        for task, sink in self._streams.values():
            sink.cancel()
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)


class SuiteRunner:
    """Runs cases one at a time against one client, one fake server and one proxy.

    Several runners may play at once in one process (``conformance._lanes``), each with
    its own server, proxy and client: ``gate`` is then the scheduler's, which plays every
    re-judging try with no other case at once (and an undecidable try that played beside
    others is first played again alone at its own scale), and ``budget`` is the run's one
    re-judging budget. By default both are this runner's own.
    """

    def __init__(
        self,
        adapter_factory: Callable[[], ClientAdapter],
        profiles: Sequence[Profile] | None,
        *,
        timing: Timing | None = None,
        seed: int = 0,
        case_timeout: float = CASE_TIMEOUT,
        gate: Gate | None = None,
        budget: RejudgeBudget | None = None,
        wire_format: str | None = None,
    ) -> None:
        self._factory = adapter_factory
        # None: the profile the client declares (AdapterInfo.profile), known once it starts
        self._asked = None if profiles is None else tuple(profiles)
        self.profiles = self._asked or ()
        self._timing = timing
        self.seed = seed
        self.case_timeout = case_timeout
        # None: the one the client declares (AdapterInfo.wire_format), else "auto"
        self._wire_format = wire_format
        self.server = FakeServer(wire_format=wire_format or "auto")
        self.proxy: FaultProxy
        self.adapter: ClientAdapter
        self.info: AdapterInfo
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client_lag: LagProbe
        self._configured: ClientPolicy | None = None
        self._gate: Gate = gate if gate is not None else Solo()
        self._budget = budget if budget is not None else RejudgeBudget()
        self._heartbeat: _Heartbeat
        self._adapter_open = False  # self.adapter is started and not yet closed
        # Why no further case can be played (a blocked loop, a client that cannot be
        # restarted): each later case is an ERROR with this reason, at once.
        self._unusable: str | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> SuiteRunner:
        """Start the fake server, the proxy and the adapter; on failure, stop what started."""
        from fake_servers import FaultProxy

        try:
            self.server.start()
            self.proxy = FaultProxy(self.server.url, ledger=self.server.ledger).start()
            self._start_adapter()
        except BaseException as exc:
            if isinstance(exc, LoopBlocked):  # never wait on a blocked loop
                self._abandon_loop(str(exc))
            self.close()
            raise
        return self

    def _start_adapter(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=_run_loop, args=(loop,), name="streamcheck-adapter", daemon=True
        )
        self._thread.start()
        self._heartbeat = _Heartbeat(loop)
        self._client_lag = LagProbe(self.server.ledger, CLIENT_SOURCE)
        self._configured = None
        self.adapter = self._call(self._make_adapter(), 2 * COMMAND_LIMIT, "starting the adapter")
        if getattr(self.adapter, "hosts_library_clients", False):  # docs/timing.md
            self._client_lag = LagProbe(self.server.ledger, SDK_LOOP_SOURCE)
        self.info = self.adapter.info
        self._adapter_open = True
        if self._asked is None:
            self.profiles = declared_profiles(self.info)
        if self._wire_format is None and self.info.wire_format is not None:
            try:
                self.server.wire_format = self.info.wire_format
            except ValueError as exc:
                raise HarnessError(f"{self.info.name} declares {exc}") from None

    async def _make_adapter(self) -> ClientAdapter:
        adapter = self._factory()
        start = getattr(adapter, "start", None)  # e.g. the exec adapter's handshake
        if start is not None:
            try:
                await start()
            except BaseException:  # whoever started it stops it: nothing half started stays
                with contextlib.suppress(Exception):
                    await adapter.aclose()
                raise
        return adapter

    def close(self) -> None:
        """Stop the adapter, its loop, the proxy and the server; idempotent."""
        try:
            self._close_adapter()
        finally:
            self._stop_loop()
            try:
                proxy = getattr(self, "proxy", None)  # unset if start() failed before it
                if proxy is not None:
                    proxy.stop()
            finally:
                self.server.stop()

    def _close_adapter(self) -> None:
        if self._adapter_open and self._loop is not None:
            self._adapter_open = False
            with contextlib.suppress(HarnessError):
                self._call(self.adapter.aclose(), CLOSE_LIMIT, "closing the adapter")

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        probe = asyncio.run_coroutine_threadsafe(self._client_lag.aclose(), loop)
        with contextlib.suppress(Exception):  # a blocked loop: the probe dies with it
            probe.result(1.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)
        if not thread.is_alive():
            loop.close()

    def _abandon_loop(self, reason: str) -> None:
        """Leave a blocked loop behind: no waiting on it, no more cases on this runner.

        Its thread is a daemon, so it never keeps the run from ending; should the
        blocking call return, the loop stops and closes itself (``_run_loop``).
        """
        self._unusable = reason
        loop, self._loop, self._thread = self._loop, None, None
        self._adapter_open = False
        if loop is not None:
            self._client_lag.stop()
            with contextlib.suppress(RuntimeError):  # it stopped by itself meanwhile
                loop.call_soon_threadsafe(loop.stop)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float, doing: str) -> T:
        assert self._loop is not None
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        self._wait(future, timeout, doing)
        try:
            return future.result()
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(f"{doing} failed: {type(exc).__name__}: {exc}") from exc

    def _wait(self, future: Future[T], timeout: float, doing: str) -> None:
        """Wait for ``future`` until it is done, the time limit passes, or the loop is
        seen blocked (then at once: a blocked loop never finishes anything)."""
        deadline = time.monotonic() + timeout
        while not future.done():
            left = deadline - time.monotonic()
            if left <= 0:
                future.cancel()
                if self._loop_blocked():
                    raise self._blocked(doing)
                raise HarnessError(f"the adapter did not finish {doing} within {timeout:.1f}s")
            concurrent.futures.wait([future], timeout=min(WATCH_SLICE, left))
            if not future.done() and self._heartbeat.silent_for() >= LOOP_BLOCK_LIMIT:
                future.cancel()
                raise self._blocked(doing)

    def _loop_blocked(self) -> bool:
        """After a timeout: is the loop blocked? A loop that went quiet is watched until
        it beats again or stays silent for LOOP_BLOCK_LIMIT (at most that long, once)."""
        while self._heartbeat.silent_for() >= QUIET_BEAT:
            if self._heartbeat.silent_for() >= LOOP_BLOCK_LIMIT:
                return True
            time.sleep(WATCH_SLICE)
        return False

    def _blocked(self, doing: str) -> LoopBlocked:
        return LoopBlocked(
            f"the adapter blocked its event loop: no callback ran on it for "
            f"{LOOP_BLOCK_LIMIT:.0f}s while {doing}\n"
            "A synchronous call (time.sleep(), a blocking read) inside an async method "
            "blocks it: run blocking work with asyncio.to_thread(), or wrap a blocking "
            "client in SyncClientAdapter. The kit cannot take a blocked thread back: it is "
            "left behind as a daemon thread, which does not keep the run from ending, and "
            "every remaining case is ERROR at once"
        )

    @property
    def unusable(self) -> str | None:
        """Why no further case can be played on this runner (None: it can play)."""
        return self._unusable

    # -- profiles ------------------------------------------------------------------
    @property
    def timing(self) -> Timing:
        if self._timing is not None:
            return self._timing
        return "test" if "configurable" in self.info.capabilities else "real"

    def profile_for(self, transport: str) -> Profile | None:
        return next((p for p in self.profiles if transport in p.transports), None)

    # -- one case --------------------------------------------------------------------
    def run(self, case: Case) -> CaseResult:
        started = now()
        profile = self.profile_for(case.transport)
        skipped = self._skip_reason(case, profile)
        if skipped is not None:
            kind, reason = skipped
            return CaseResult(
                case,
                Verdict.UNSUPPORTED,
                profile.key if profile else None,
                self.timing,
                reason=reason,
                skip=kind,
            )
        assert profile is not None
        if self._unusable is not None:
            return CaseResult(case, Verdict.ERROR, profile.key, self.timing, reason=self._unusable)
        tries: list[Rejudged] = []
        factors = list(self._factors())
        pace = 0.0  # seconds per unit of scale the first try took
        while factors:
            factor = factors.pop(0)
            policy = self._policy(case, profile, factor)
            try_started = now()
            # A try's durations grow with its scale: at x30 the herd took 54 s (the
            # reference beside 2 CPU burners), near CASE_TIMEOUT. A re-judging try gets
            # LIMIT_GROWTH times the first try's pace, and CASE_TIMEOUT at the least.
            limit = max(self.case_timeout, LIMIT_GROWTH * pace * factor)
            try:
                # A re-judging try plays with no other case at once: the noise that left
                # the first try undecidable may have been another lane's.
                with self._gate.alone() if tries else contextlib.nullcontext():
                    outcome, evidence, ran_out = self._play(case, policy, limit)
            except HarnessError as exc:
                return CaseResult(
                    case,
                    Verdict.ERROR,
                    profile.key,
                    self.timing,
                    reason=self._after_error(case, exc),
                    duration=now() - started,
                    factor=factor,
                    rejudged=tuple(tries),
                )
            if tries:
                self._budget.spend(now() - try_started)
            else:
                pace = (now() - try_started) / factor
            outcome = _sure(outcome, evidence, ran_out)
            if not outcome.undecidable:
                return CaseResult(
                    case,
                    _verdict(case, outcome),
                    profile.key,
                    self.timing,
                    outcome,
                    evidence=evidence,
                    duration=now() - started,
                    factor=factor,
                    rejudged=tuple(tries),
                )
            beside = not tries and self._gate.beside()
            if beside:  # first alone at the same scale: the noise may have been theirs
                factors.insert(0, factor)
            tries.append(Rejudged(factor, outcome.observed, evidence.noise.headline(), beside))
            if self._budget.spent:
                break
        return CaseResult(
            case,
            Verdict.INCONCLUSIVE,
            profile.key,
            self.timing,
            outcome,
            reason=_inconclusive(tries, self._budget.spent),
            evidence=evidence,
            duration=now() - started,
            factor=tries[-1].factor,
            rejudged=tuple(tries),
        )

    def _factors(self) -> tuple[float, ...]:
        """The scales a case may be judged at: its own, then coarser ones if it can be."""
        if self.timing == "test" and "configurable" in self.info.capabilities:
            return (1.0, *REJUDGE_FACTORS)
        return (1.0,) * (1 + FIXED_RETRIES)  # a fixed policy: again at its own scale

    def _policy(self, case: Case, profile: Profile, factor: float) -> ClientPolicy:
        policy = profile.at(self.timing)
        if case.tune is not None and "configurable" in self.info.capabilities:
            policy = case.tune(policy)
        return policy if factor == 1.0 else policy.scaled(factor)

    def _skip_reason(self, case: Case, profile: Profile | None) -> tuple[SkipKind, str] | None:
        if profile is None:  # first: a POST-only SDK's GET cases do not apply to it
            names = ", ".join(p.key for p in self.profiles)
            return "transport", f"no profile in this run covers {case.transport.upper()} ({names})"
        missing = sorted(case.needs - self.info.capabilities)
        if missing:
            return "capability", f"the client lacks the capability {', '.join(missing)}"
        configurable = "configurable" in self.info.capabilities
        if case.tune is not None and not case.tune_optional and not configurable:
            return "untunable", (
                f"the case runs a tuned policy ({_purpose(case.tune)}) and the client cannot "
                "be configured: at its own numbers the case could not show what it checks"
            )
        # Judged on the policy the case would run: tuned where the client takes it.
        reason = case.applies(self._policy(case, profile, 1.0), case.transport)
        return ("profile", f"not applicable to {profile.key}: {reason}") if reason else None

    def _play(
        self, case: Case, policy: ClientPolicy, limit: float
    ) -> tuple[Outcome, Evidence, bool]:
        """The case's outcome, its evidence, and whether one of its waits ran out, within
        ``limit`` seconds of play."""
        ctx_holder: list[_Context] = []
        self._measure_lag(True)
        try:
            self._prepare(policy)
            evidence = self._call(
                self._play_async(case, policy, ctx_holder, limit),
                limit + 5.0,
                f"case {case.id}",
            )
        except HarnessError as exc:  # the same kind: a blocked loop must stay known as one
            raise type(exc)(f"{exc}{_doing(ctx_holder)}{self._diagnostics()}") from None
        finally:
            self._measure_lag(False)
        ctx = ctx_holder[0]
        if ctx.failures:
            raise HarnessError("; ".join(ctx.failures))
        return name_endings(case.check(evidence, policy), evidence), evidence, ctx.ran_out

    def _measure_lag(self, on: bool) -> None:
        """The harness measures its own noise in every loop that stamps or waits, while a
        case plays (its ledger keeps only that): an idle runner's probes would only add
        to the load on the runners that play beside it (``conformance._lanes``)."""
        self.server.measure_lag(on)
        self.proxy.measure_lag(on)
        if on and self._loop is not None:
            self._client_lag.start(self._loop)
        else:
            self._client_lag.stop()
        # A client with a loop of its own to probe (the browser page: docs/browser.md)
        page_probe = getattr(self.adapter, "measure_lag", None)
        if page_probe is not None:
            page_probe(self.server.ledger if on else None)

    def _prepare(self, policy: ClientPolicy) -> None:
        self.server.load(Scenario(seed=self.seed))
        self.proxy.clear()
        if "configurable" in self.info.capabilities and self._configured != policy:
            self._call(self.adapter.configure(policy), COMMAND_LIMIT, "configuring the client")
            self._configured = policy
        # An adapter whose reset may take longer (a browser page reopened) says so.
        limit = max(COMMAND_LIMIT, getattr(self.adapter, "reset_limit", 0.0) + COMMAND_MARGIN)
        self._call(self.adapter.reset(), limit, "resetting the client")

    async def _play_async(
        self, case: Case, policy: ClientPolicy, holder: list[_Context], limit: float
    ) -> Evidence:
        ctx = _Context(self, policy, case.transport)
        holder.append(ctx)
        started = now()
        try:
            with _quiet_gc(case.quiet_gc):
                await asyncio.wait_for(case.play(ctx), limit)
            hung = ctx.hung()  # judged as the case ends, before its streams are closed
            if hung is not None:
                raise HarnessError(hung)
        except TimeoutError:
            raise HarnessError(f"case {case.id} passed its {limit:.3g}s time limit") from None
        except SetupFailed as exc:
            raise HarnessError(f"case {case.id} could not be set up: {exc}") from None
        finally:
            await ctx.settle()
            await ctx.close()
            collect = getattr(self.adapter, "collect_lag", None)  # rows still in the page
            if collect is not None:
                await collect()
        return Evidence(
            attempts=ctx.ledger.attempts(),
            connections=ctx.ledger.connections(),
            deliveries=ctx.deliveries.all(),
            started_at=started,
            noise=Noise.from_ledger(
                ctx.ledger.lags(), hops=ctx.ledger.hops(), heads=ctx.ledger.heads()
            ),
        )

    def _diagnostics(self) -> str:
        """What the adapter can tell about its client (the exec adapter: stderr)."""
        diagnostics = getattr(self.adapter, "diagnostics", None)
        if diagnostics is None:
            return ""
        try:
            return f"\n{diagnostics()}"
        except Exception:  # diagnostics must never hide the original error
            return ""

    def _after_error(self, case: Case, error: HarnessError) -> str:
        """Recover from a case's harness error; the case's reason, which says too when
        the kit could not recover (then every later case says so, at once)."""
        if isinstance(error, LoopBlocked):
            self._abandon_loop(_not_run(case, "the adapter blocked its event loop in", BLOCKED))
            return str(error)
        try:
            self._recover()
        except HarnessError as restart:
            first = (str(restart).splitlines() or [""])[0]
            reason = _not_run(case, "the client could not be restarted after", first)
            if isinstance(restart, LoopBlocked):
                self._abandon_loop(reason)
            else:
                self._unusable = reason
                self._stop_loop()  # the loop the failed start ran on; nothing else will
            return f"{error}\nThe kit could not restart the client after this error: {restart}"
        return str(error)

    def _recover(self) -> None:
        """After a harness error: a fresh loop and adapter, so the next case starts clean."""
        self._close_adapter()
        self._stop_loop()
        self._start_adapter()


@contextlib.contextmanager
def _quiet_gc(on: bool) -> Iterator[None]:
    """Keep the kit's own garbage collector from pausing every thread mid-measurement.

    A full collection of a large test process takes tens of milliseconds and holds
    the GIL: the server would stamp every arrival due in that pause late, together.
    Freezing the existing objects leaves only the case's own to collect.
    """
    if not on:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The adapter thread: the loop until it is stopped, then closed, so that even a
    loop left behind blocked closes itself should its blocking call ever return."""
    try:
        loop.run_forever()
    finally:
        # As asyncio.run() does: what is left is cancelled and may unwind (briefly).
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))
        loop.close()


def _not_run(case: Case, what: str, why: str) -> str:
    """The one reason every case after ``case`` gives: what broke, where to look, why."""
    return f"not run: {what} {case.id} (see its ERROR): {why}"


def _doing(holder: list[_Context]) -> str:
    if not holder:
        return ""
    ctx = holder[0]
    last = ctx.deliveries.all()[-5:]
    client = "; ".join(d.describe() for d in last) or "nothing delivered"
    return f". The client was last seen: {client}. Server: {ctx.ledger.summary()}"


def _inconclusive(tries: Sequence[Rejudged], out_of_budget: bool) -> str:
    scales = ", ".join(f"x{t.factor:g}" for t in tries)
    why = " (the run's re-judging budget is spent)" if out_of_budget else ""
    return (
        f"undecidable at every scale tried ({scales}){why}: the harness's own measured "
        f"noise hides the difference between a correct and a broken client. Last try: "
        f"{tries[-1].observed}; {tries[-1].noise}"
    )


def _purpose(tune: Callable[[ClientPolicy], ClientPolicy]) -> str:
    """What a case's tuning does: its docstring's first sentence (or its name)."""
    doc = " ".join((tune.__doc__ or "").split())
    return doc.split(". ")[0].rstrip(".") if doc else tune.__name__


def _sure(outcome: Outcome, evidence: Evidence, ran_out: bool) -> Outcome:
    """A failure stands unless a deadline ran out while the kit's own loops were starved:
    one of the case's waits, or the client's own silence timer (a 302 that a starved
    server took 450 ms to send met a 300 ms first-chunk timer, and the client's retry
    began a second redirect chain), or while a request was held on its way beyond every
    loop (a browser's network process held one 2.1 s: ``Noise.held_in_transit``), or
    while a browser page stood still (``Noise.page_stalled``). What it
    waited for may have been late for the kit's slowness; such a failure is undecidable,
    and re-judged. A failure
    no deadline decided stands: a 5 MiB event that starves the loops by itself and
    arrives cut still FAILs."""
    if outcome.ok or outcome.undecidable or outcome.sure:
        return outcome
    noise = evidence.noise
    decided_by_a_deadline = ran_out or evidence.timer_fired
    why = (
        (noise.overloaded() or noise.held_in_transit() or noise.page_stalled())
        if decided_by_a_deadline
        else None
    )
    if why is None:
        return outcome
    return dataclasses.replace(outcome, undecidable=True, observed=f"{outcome.observed}; {why}")


def declared_profiles(info: AdapterInfo) -> tuple[Profile, ...]:
    """The profiles of a run that named none: the one the client declares, else the seed's.

    Raises:
        HarnessError: the client declares a profile the kit does not know.
    """
    if info.profile is None:
        return tuple(get_profile(name) for name in DEFAULT_PROFILES)
    try:
        return (get_profile(info.profile),)
    except ProfileError as exc:
        raise HarnessError(f"{info.name} declares the profile {info.profile!r}: {exc}") from None


def _verdict(case: Case, outcome: Outcome) -> Verdict:
    if outcome.ok:
        return Verdict.PASS
    return Verdict.FAIL if case.level.value == "MUST" else Verdict.NON_STRICT


def run_suite(
    adapter_factory: Callable[[], ClientAdapter],
    *,
    profile: str | Profile | Sequence[str | Profile] | None = None,
    select: Iterable[str] | None = None,
    timing: Timing | None = None,
    seed: int = 0,
    case_timeout: float = CASE_TIMEOUT,
    lanes: int | None = None,
    wire_format: str | None = None,
) -> tuple[CaseResult, ...]:
    """Run conformance cases against a client, without pytest.

    Args:
        adapter_factory: Makes the adapter (called again after an adapter breaks).
        profile: The profile(s) the client claims, by name (``name@version``) or value;
            None: the one its adapter declares (``AdapterInfo.profile``), else
            ``DEFAULT_PROFILES``.
        select: Case ids or globs (``"SC-RETRY-*"``); None runs the whole catalog.
        timing: ``"test"`` or ``"real"``; None: test timing for configurable clients.
        seed: Reproduces a run.
        case_timeout: Hard time limit per case, in seconds.
        lanes: Cases played at once, each lane with its own server, proxy and client
            (``conformance._lanes``: exclusive cases and re-judging play alone); 1 plays
            one case at a time; None: ``DEFAULT_LANES``.
        wire_format: The format the cases' plain endpoints speak (``"openai"``,
            ``"responses"``, ``"anthropic"``, ``"gemini"``); None: the one the adapter
            declares (``AdapterInfo.wire_format``), else by the request's path.

    Returns:
        One result per case, in catalog order; ``result.verdict`` is PASS, FAIL,
        NON-STRICT, UNSUPPORTED, ERROR or INCONCLUSIVE, as in the plugin.

    Raises:
        ValueError: An id or glob matches no case.
        HarnessError: The client could not be started.
    """
    profiles = None if profile is None else _profiles(profile)
    cases = select_cases(select)
    from conformance._lanes import DEFAULT_LANES, Lanes  # it builds on this module

    runner = Lanes(
        adapter_factory,
        profiles,
        timing=timing,
        seed=seed,
        case_timeout=case_timeout,
        lanes=DEFAULT_LANES if lanes is None else lanes,
        wire_format=wire_format,
    ).start()
    try:
        return runner.run(cases)
    finally:
        runner.close()


def _profiles(profile: str | Profile | Sequence[str | Profile]) -> list[Profile]:
    names = [profile] if isinstance(profile, str | Profile) else list(profile)
    if not names:  # every case would be UNSUPPORTED: a run that judged nothing
        raise ValueError("profile: an empty list; None takes the client's declared profile")
    return [p if isinstance(p, Profile) else get_profile(p) for p in names]


def select_cases(select: Iterable[str] | None = None) -> tuple[Case, ...]:
    """The catalog's cases whose id matches one of ``select`` (ids or globs), in order."""
    cases = all_cases()
    if select is None:
        return cases
    patterns = [select] if isinstance(select, str) else list(select)
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c.id, p) for c in cases)]
    if unmatched:
        raise ValueError(f"no case in the catalog matches {', '.join(map(repr, unmatched))}")
    return tuple(c for c in cases if any(fnmatch.fnmatchcase(c.id, p) for p in patterns))
