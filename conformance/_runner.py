"""Play a case through an adapter and turn the evidence into a verdict; no pytest.

A ``SuiteRunner`` owns one fake server, one fault proxy and one client (hosted on a loop
of its own: ``conformance._host``). For each case it picks the profile, says why a case
is not played, plays the case (``conformance._context``) and judges it, re-judging an
undecidable one as ``conformance.timing.Rejudging`` asks. A case the adapter breaks is
an ERROR, and the next case gets a fresh loop and adapter. Three breakages end the run's cases
at once instead (each later case is an ERROR saying why): a loop blocked by a synchronous
call (the kit cannot take a thread back), a client that stopped answering the kit's
commands (a fresh one would cost the same limit each case), and a client that cannot be
started again after it broke. An adapter's ``aclose()`` that fails is never hidden: in
the reason of the case whose error replaced it, or, as the run ends, in ``close_failures``.
``run_suite`` (``conformance._suite``) and the lanes build on this.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from conformance._adapter import (
    AdapterInfo,
    ClientAdapter,
    Diagnostics,
    LagCollector,
    NoiseProbe,
    ResetLimit,
)
from conformance._case import (
    Case,
    Outcome,
    RequestUnsupported,
    SetupFailed,
    Verdict,
    catalog_slot,
)
from conformance._checks import name_endings
from conformance._context import CaseRun, quiet_gc
from conformance._evidence import Evidence
from conformance._host import BLOCKED, AdapterHost
from conformance._profiles import Profile, ProfileError, Timing, get_profile, longest_duration
from conformance._result import (
    CaseResult,
    HarnessError,
    LoopBlocked,
    SkipKind,
    Unresponsive,
    verdict_of,
)
from conformance._text import from_text
from conformance.reference._config import ClientPolicy
from conformance.timing._noise import Noise
from conformance.timing._rejudge import (
    Decided,
    Play,
    RejudgeBudget,
    Rejudging,
    Step,
    Tried,
    factors_for,
    sure,
)
from fake_servers import FakeServer, FaultProxy, Scenario, now

__all__ = [
    "CASE_TIMEOUT",
    "DEFAULT_PROFILES",
    "Breakage",
    "Gate",
    "Solo",
    "SuiteRunner",
    "aclose_failed",
    "declared_profiles",
]

CASE_TIMEOUT = 60.0  # seconds one case may take before it is an ERROR
# Seconds of virtual time a case may play before it is an ERROR: far beyond the longest
# case at the seed's real numbers (a 90 s silence, a 60 s cooldown, a few times over),
# and some seconds of wall time at the most (a jump costs well under a millisecond). A
# policy with longer durations gets VIRTUAL_ROUNDS of its longest (``virtual_limit``).
VIRTUAL_LIMIT = 3600.0
VIRTUAL_ROUNDS = 4
# The first case's reason, after a client stopped answering: why no later case waits.
GAVE_UP = (
    "The kit gives up on a client that stops answering its commands: every later case of "
    "this run is an ERROR at once, instead of waiting out the same limit again"
)
# GET cases run under the first profile covering GET, POST cases the first covering POST.
# The plugin's --streamcheck-profile default says the same (a kit test holds them equal).
DEFAULT_PROFILES = ("seed-eventsource", "seed-fetch")


@runtime_checkable
class Breakage(Protocol):
    """An adapter that knows when its client broke (``ExecAdapter``: the process exited)."""

    async def breakage(self) -> str | None:
        """Why the client can no longer be used, in full; None while it can."""


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
        close_failures: list[str] | None = None,
    ) -> None:
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
        self.info: AdapterInfo
        self._host = AdapterHost(adapter_factory, self.server.ledger)
        self._configured: ClientPolicy | None = None
        self._gate: Gate = gate if gate is not None else Solo()
        self._budget = budget if budget is not None else RejudgeBudget()
        # Why no further case can be played (a blocked loop, a client that stopped
        # answering or cannot be restarted): each later case is an ERROR with this
        # reason, at once.
        self._unusable: str | None = None
        # Why the adapter's aclose() failed as this runner closed (the caller's to report).
        self.close_failures = close_failures if close_failures is not None else []

    @property
    def adapter(self) -> ClientAdapter:
        """The adapter the cases play through (a fresh one after a harness error)."""
        return self._host.adapter

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> SuiteRunner:
        """Start the adapter, the fake server and the proxy; on failure, stop what started.

        In virtual time the server and the proxy serve on the adapter's loop, so the
        three share its clock; otherwise each runs on a loop of its own.
        """
        try:
            self._start_adapter()
            self._start_services()
        except BaseException as exc:
            if isinstance(exc, LoopBlocked):  # never wait on a blocked loop
                self._abandon(str(exc))
            self.close()
            raise
        return self

    def _start_services(self) -> None:
        shared = self._host.loop if self.timing == "virtual" else None
        self.server.marked = self.info.reports == "text"  # its text alone then tells
        self.server.start(loop=shared)
        self.proxy = FaultProxy(self.server.url, ledger=self.server.ledger).start(loop=shared)

    def _stop_services(self) -> None:
        try:
            proxy = getattr(self, "proxy", None)  # unset if start() failed before it
            if proxy is not None:
                proxy.stop()
        finally:
            self.server.stop()

    def _start_adapter(self) -> None:
        self._configured = None
        self.info = self._host.start().info
        if self._timing == "virtual" and not self.info.virtual_time:
            raise HarnessError(
                f"virtual time was asked for, and {self.info.name} does not declare that it "
                "waits on the kit's event loop alone (AdapterInfo.virtual_time): run it with "
                "--streamcheck-timing=real (or test, if it is configurable)"
            )
        if self._asked is None:
            self.profiles = declared_profiles(self.info)
        if self._wire_format is None and self.info.wire_format is not None:
            try:
                self.server.wire_format = self.info.wire_format
            except ValueError as exc:
                raise HarnessError(f"{self.info.name} declares {exc}") from None

    def close(self) -> None:
        """Stop the adapter, its loop, the proxy and the server; idempotent. Why the
        adapter's aclose() failed, if it did, goes to ``close_failures``."""
        if self._shares_loop():  # the server and the proxy first, while their loop runs
            try:
                self._stop_services()
            finally:
                self._close_host()
            return
        try:
            self._close_host()
        finally:
            self._stop_services()

    def _close_host(self) -> None:
        failure = self._host.close()
        if failure is not None:
            self.close_failures.append(f"{self._name()}: {failure}")

    def _name(self) -> str:
        info = getattr(self, "info", None)  # unset if the adapter never started
        return info.name if info is not None else "the adapter"

    def _shares_loop(self) -> bool:
        return self._host.loop is not None and self.server.hosted_on is self._host.loop

    def _abandon(self, reason: str) -> None:
        """Leave a blocked loop behind (``AdapterHost.abandon``): no more cases here. In
        virtual time the server and the proxy served on it: they are left too."""
        self._unusable = reason
        if self._shares_loop():
            self.server.abandon()
            proxy = getattr(self, "proxy", None)
            if proxy is not None:
                proxy.abandon()
        self._host.abandon()

    @property
    def unusable(self) -> str | None:
        """Why no further case can be played on this runner (None: it can play)."""
        return self._unusable

    # -- profiles ------------------------------------------------------------------
    @property
    def timing(self) -> Timing:
        """Virtual for a client that waits on the kit's loop alone, else test timing for
        a configurable one, else real; or what the run asked for."""
        if self._timing is not None:
            return self._timing
        if self.info.virtual_time:
            return "virtual"
        return "test" if "configurable" in self.info.capabilities else "real"

    def play_unscaled(self) -> None:
        """Play at the client's own numbers from here: virtual time for a client that
        can take it, else real time (never test timing's scaled policy). For runs whose
        faults are in real seconds (a weather): call it once the runner started."""
        self._timing = "virtual" if self.info.virtual_time else "real"

    def profile_for(self, transport: str) -> Profile | None:
        return next((p for p in self.profiles if transport in p.transports), None)

    # -- one case --------------------------------------------------------------------
    def run(self, case: Case) -> CaseResult:
        try:
            return self._run(case)
        except RequestUnsupported as exc:  # a request field the adapter's API lacks
            profile = self.profile_for(case.transport)
            key = profile.key if profile else None
            return CaseResult(
                case, Verdict.UNSUPPORTED, key, self.timing, reason=str(exc), skip="capability"
            )

    def _run(self, case: Case) -> CaseResult:
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
        if self.timing == "virtual":
            return self._run_exact(case, profile)
        tunable = self.timing == "test" and "configurable" in self.info.capabilities
        rejudging = Rejudging(
            factors_for(tunable), budget=self._budget, case_timeout=self.case_timeout
        )
        step: Step = rejudging.play
        while isinstance(step, Play):
            policy = self._policy(case, profile, step.factor)
            try_started = now()
            try:
                # A re-judging try plays with no other case at once: the noise that left
                # the first try undecidable may have been another lane's.
                with self._gate.alone() if step.alone else contextlib.nullcontext():
                    outcome, evidence, ran_out = self._play(case, policy, step.limit)
            except HarnessError as exc:
                return CaseResult(
                    case,
                    Verdict.ERROR,
                    profile.key,
                    self.timing,
                    reason=self._after_error(case, exc),
                    duration=now() - started,
                    factor=step.factor,
                    rejudged=rejudging.tries,
                )
            took = now() - try_started
            outcome = sure(outcome, evidence, ran_out)
            step = rejudging.next(self._tried(step, took, outcome, evidence))
        if isinstance(step, Decided):
            verdict, reason = verdict_of(case, outcome), ""
        else:
            verdict, reason = Verdict.INCONCLUSIVE, step.reason
        return CaseResult(
            case,
            verdict,
            profile.key,
            self.timing,
            outcome,
            reason=reason,
            evidence=evidence,
            duration=now() - started,
            factor=step.factor,
            rejudged=rejudging.tries,
        )

    def _run_exact(self, case: Case, profile: Profile) -> CaseResult:
        """A case in virtual time: played once and judged exactly, with no noise to
        allow for, so no re-judging and no INCONCLUSIVE. A client seen waiting outside
        the loop (``fake_servers._virtual.Guard``) gets no verdict: an ERROR naming what
        it did, and every later case says so at once."""
        started = now()

        def error(reason: str) -> CaseResult:
            return CaseResult(
                case, Verdict.ERROR, profile.key, "virtual", reason=reason, duration=now() - started
            )

        try:
            policy = self._policy(case, profile, 1.0)
            outcome, evidence, _ = self._play(case, policy, virtual_limit(policy))
        except HarnessError as exc:
            return error(self._after_error(case, exc))
        escapes = self._host.loop.guard.escapes if self._host.loop is not None else []
        if escapes:
            self._unusable = _not_run(
                case, "the client waited outside the kit's loop in", "no verdict in virtual time"
            )
            return error(_escaped(self.info.name, escapes))
        if outcome.undecidable:  # exact evidence leaves nothing open: the kit's defect
            return error(f"the check found exact evidence undecidable: {outcome.observed}")
        return CaseResult(
            case,
            verdict_of(case, outcome),
            profile.key,
            "virtual",
            outcome,
            evidence=evidence,
            duration=now() - started,
        )

    def _tried(self, play: Play, took: float, outcome: Outcome, evidence: Evidence) -> Tried:
        """What the runner saw of a try, for ``Rejudging.next``."""
        if not outcome.undecidable:
            return Tried(took)
        # Only a try that did not play alone can have played beside other cases.
        beside = not play.alone and self._gate.beside()
        headline = evidence.noise.headline()
        return Tried(
            took, undecidable=True, beside=beside, observed=outcome.observed, noise=headline
        )

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
        ctx_holder: list[CaseRun] = []
        # In virtual time ``limit`` is the loop's seconds; the wall clock's is the run's.
        wall = self.case_timeout if self.timing == "virtual" else limit
        self._measure_lag(True)
        try:
            self._prepare(policy)
            evidence = self._host.call(
                self._play_async(case, policy, ctx_holder, limit),
                wall + 5.0,
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
        to the load on the runners that play beside it (``conformance._lanes``). In
        virtual time there is no noise to measure."""
        if self.timing == "virtual":
            return
        self.server.measure_lag(on)
        self.proxy.measure_lag(on)
        self._host.measure_lag(on)
        # A client with a loop of its own to probe (the browser page: docs/browser.md)
        if isinstance(self.adapter, NoiseProbe):
            self.adapter.measure_lag(self.server.ledger if on else None)

    def _prepare(self, policy: ClientPolicy) -> None:
        self.server.load(Scenario(seed=self.seed))
        self.proxy.clear()
        if "configurable" in self.info.capabilities and self._configured != policy:
            self._host.command(self.adapter.configure(policy), "configuring the client")
            self._configured = policy
        # An adapter whose reset may take longer (a browser page reopened) says so.
        takes = self.adapter.reset_limit if isinstance(self.adapter, ResetLimit) else 0.0
        self._host.command(self.adapter.reset(), "resetting the client", takes)

    async def _play_async(
        self, case: Case, policy: ClientPolicy, holder: list[CaseRun], limit: float
    ) -> Evidence:
        loop = self._host.loop
        virtual = self.timing == "virtual" and loop is not None
        if virtual:
            assert loop is not None
            loop.go_virtual()
            # Every case from its own whole CASE_SPACING: one seed, one evidence.
            loop.restart_clock(catalog_slot(case.id))
        try:
            with loop.watching() if virtual and loop else contextlib.nullcontext():
                return await self._play_case(case, policy, holder, limit, virtual)
        finally:
            if virtual and loop is not None:
                loop.go_real()  # between cases the loop waits, in real time

    async def _play_case(
        self,
        case: Case,
        policy: ClientPolicy,
        holder: list[CaseRun],
        limit: float,
        virtual: bool,
    ) -> Evidence:
        ctx = CaseRun(
            self.server, self.proxy, self.adapter, policy, case.transport, virtual=virtual
        )
        holder.append(ctx)
        started = now()
        try:
            with quiet_gc(case.quiet_gc):
                await asyncio.wait_for(case.play(ctx), limit)
            hung = ctx.hung()  # judged as the case ends, before its streams are closed
            if hung is not None:
                raise HarnessError(await self._breakage() or hung)
        except TimeoutError:
            late = f"case {case.id} passed its {limit:.3g}s time limit"
            raise HarnessError(await self._breakage() or late) from None
        except SetupFailed as exc:
            raise HarnessError(f"case {case.id} could not be set up: {exc}") from None
        finally:
            await ctx.settle()
            await ctx.close()
            ctx.detach()
            if isinstance(self.adapter, LagCollector):  # rows still in the page
                await self.adapter.collect_lag()
        if virtual:
            noise = Noise(exact=True)
        else:
            noise = Noise.from_ledger(
                ctx.ledger.lags(), hops=ctx.ledger.hops(), heads=ctx.ledger.heads()
            )
        evidence = Evidence(
            attempts=ctx.ledger.attempts(),
            connections=ctx.ledger.connections(),
            deliveries=ctx.deliveries.by_instant() if virtual else ctx.deliveries.all(),
            started_at=started,
            noise=noise,
        )
        return from_text(evidence) if self.info.reports == "text" else evidence

    async def _breakage(self) -> str | None:
        """The adapter's own account of why it broke (an exec client that exited, with its
        exit code and stderr), if it knows one: truer than "hung" or "too late"."""
        if not isinstance(self.adapter, Breakage):
            return None
        return await self.adapter.breakage()

    def _diagnostics(self) -> str:
        """What the adapter can tell about its client (the exec adapter: stderr)."""
        if not isinstance(self.adapter, Diagnostics):
            return ""
        try:
            return f"\n{self.adapter.diagnostics()}"
        except Exception:  # diagnostics must never hide the original error
            return ""

    def _after_error(self, case: Case, error: HarnessError) -> str:
        """Recover from a case's harness error; the case's reason, which says too when
        the kit could not recover, or gave up (then every later case says so, at once)."""
        if isinstance(error, LoopBlocked):
            self._abandon(_not_run(case, "the adapter blocked its event loop in", BLOCKED))
            return str(error)
        if isinstance(error, Unresponsive):  # the next client would cost the same wait
            self._unusable = _not_run(case, "the client stopped answering in", _first(error))
            return f"{error}\n{GAVE_UP}"
        closing: list[str] = []  # the replaced adapter's aclose() failure, if any
        try:
            self._recover(closing)
        except HarnessError as restart:
            reason = _not_run(case, "the client could not be restarted after", _first(restart))
            if isinstance(restart, LoopBlocked):
                self._abandon(reason)
            else:
                self._unusable = reason
                self._host.close()  # the loop the failed start ran on; nothing else will
            return (
                f"{error}{_closing(closing)}\n"
                f"The kit could not restart the client after this error: {restart}"
            )
        return f"{error}{_closing(closing)}"

    def _recover(self, closing: list[str]) -> None:
        """After a harness error: a fresh loop and adapter, so the next case starts clean
        (and, in virtual time, the server and the proxy with them, on the new loop).
        Why the replaced adapter's aclose() failed, if it did, goes to ``closing``."""
        shared = self._shares_loop()
        if shared:
            self._stop_services()
        failure = self._host.close()
        if failure is not None:
            closing.append(failure)
        self._start_adapter()
        if shared:
            self._start_services()


def virtual_limit(policy: ClientPolicy) -> float:
    """A case's limit in virtual time under ``policy``: VIRTUAL_LIMIT, or VIRTUAL_ROUNDS
    of its longest duration when that is longer (a 6000 s read timeout, waited out)."""
    return max(VIRTUAL_LIMIT, VIRTUAL_ROUNDS * longest_duration(policy))


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


def _escaped(name: str, escapes: Sequence[object]) -> str:
    first = "\n".join(f"  {e}" for e in escapes[:5])
    return (
        f"no verdict in virtual time: {name} waited outside the kit's event loop, so its "
        f"waits would not be measured truly:\n{first}\n"
        "Virtual time is only true for a client that waits on the loop alone (asyncio or "
        "anyio sleeps and sockets). Fix the client, or drop AdapterInfo.virtual_time and "
        "run it with --streamcheck-timing=real (or test)"
    )


def aclose_failed(failures: Sequence[str]) -> str:
    """The ERROR of a run whose adapters' aclose() failed as it ended (``close_failures``)."""
    return "adapter aclose failed as the run ended: " + "\n".join(failures)


def _first(error: HarnessError) -> str:
    return (str(error).splitlines() or [""])[0]


def _closing(failures: Sequence[str]) -> str:
    """A case's note that closing its adapter, to replace it, failed too."""
    return "".join(f"\nClosing the adapter after this error failed too: {f}" for f in failures)


def _not_run(case: Case, what: str, why: str) -> str:
    """The one reason every case after ``case`` gives: what broke, where to look, why."""
    return f"not run: {what} {case.id} (see its ERROR): {why}"


def _doing(holder: list[CaseRun]) -> str:
    if not holder:
        return ""
    ctx = holder[0]
    last = ctx.deliveries.all()[-5:]
    client = "; ".join(d.describe() for d in last) or "nothing delivered"
    return f". The client was last seen: {client}. Server: {ctx.ledger.summary()}"


def _purpose(tune: Callable[[ClientPolicy], ClientPolicy]) -> str:
    """What a case's tuning does: its docstring's first sentence (or its name)."""
    doc = " ".join((tune.__doc__ or "").split())
    return doc.split(". ")[0].rstrip(".") if doc else tune.__name__
