"""The ``llm_server`` fixture: provider endpoints behind a fault proxy, for unchanged apps.

One fake server and one fault proxy serve the whole session; each test gets them
reset (no endpoints, an empty ledger, the proxy online and clean) and an
environment in which the official SDKs talk to the proxy with dummy keys. With
``--streamcheck-verdicts`` the test's verdict is left on its item for the reporter
(``pytest_streamcheck.reports._report``, the one writer of reports). This module is imported by
the plugin only when the fixture is used; the kit is imported lazily.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conformance._profiles import Profile, Timing
    from conformance._verdict import AppVerdict
    from conformance.timing import Noise
    from conformance.weather import Weather
    from conformance.weather._session import WeatherSession
    from fake_servers import FakeServer, FaultProxy, Ledger, Scenario, Step
    from fake_servers._script import Method, Then

__all__ = [
    "DUMMY_KEY",
    "VERDICT_ROW_KEY",
    "LLMServer",
    "LLMSession",
    "ProviderEndpoint",
    "provider_environment",
    "serve_test",
]

DUMMY_KEY = "sk-streamcheck-dummy"  # a real provider rejects it: nothing is spent or sent
# The test's verdict row, on its item until the reporter puts it on the teardown report.
VERDICT_ROW_KEY: pytest.StashKey[dict[str, Any]] = pytest.StashKey()
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# A verdict with a stream still open waits at most this long for every probed loop to
# turn (a quiet loop turns within its 5 ms probe interval), polling this often.
PROBES_PATIENCE = 2.0
PROBES_POLL = 0.005
DEADLINE_ROUNDS = 3  # waits for a close's deadline that the lag measured meanwhile moved
# Credentials and identities that would otherwise travel to the fake server, or make an
# SDK pick its own endpoint (a profile file, a bearer token).
_REMOVED = (
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_ADMIN_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
)


def provider_environment(proxy_url: str, environ: dict[str, str]) -> dict[str, str | None]:
    """The variables to set (a value) or remove (None) so the SDKs reach ``proxy_url``.

    OpenAI's SDK appends paths to ``OPENAI_BASE_URL`` (so it ends in ``/v1``);
    Anthropic's and google-genai's add the version themselves.
    """
    no_proxy = [h for h in environ.get("NO_PROXY", "").split(",") if h.strip()]
    return {
        "OPENAI_BASE_URL": proxy_url + "/v1",
        "ANTHROPIC_BASE_URL": proxy_url,
        "GOOGLE_GEMINI_BASE_URL": proxy_url,  # google-genai (google/genai/_base_url.py)
        "GOOGLE_VERTEX_BASE_URL": proxy_url,
        "GOOGLE_GENAI_USE_VERTEXAI": "false",
        "OPENAI_API_KEY": DUMMY_KEY,
        "ANTHROPIC_API_KEY": DUMMY_KEY,
        "GEMINI_API_KEY": DUMMY_KEY,
        "GOOGLE_API_KEY": DUMMY_KEY,
        # A corporate HTTP(S)_PROXY must not capture the local server's traffic.
        "NO_PROXY": ",".join([*no_proxy, *(h for h in _LOCAL_HOSTS if h not in no_proxy)]),
        **dict.fromkeys(_REMOVED),
    }


@dataclass(frozen=True)
class ProviderEndpoint:
    """One provider's endpoint on the fake server: it knows its paths and wire format.

    Streams on a provider's path speak its format by themselves (``format="auto"``);
    ``format`` names it for the reader.
    """

    name: str
    paths: tuple[str, ...]  # the first is the streaming one
    format: str
    owner: LLMServer

    @property
    def path(self) -> str:
        return self.paths[0]

    @property
    def url(self) -> str:
        """The endpoint's URL through the fault proxy."""
        return self.owner.url + self.path

    def script(self, *steps: Step | Iterable[Step], then: Then = "repeat_last") -> None:
        """Script what successive attempts get (on each of the provider's paths).

        Args:
            *steps: Steps, or tuples of steps (the failure shorthands return those).
            then: What attempts past the last step get: "repeat_last" or "cycle".
        """
        played = _flatten(steps)
        for path in self.paths:
            self.owner.script(path, *played, then=then)


def _flatten(steps: Sequence[Step | Iterable[Step]]) -> list[Step]:
    from fake_servers import Raw, Respond, Stream

    out: list[Step] = []
    for item in steps:
        if isinstance(item, Respond | Stream | Raw):
            out.append(item)
        else:
            out.extend(_flatten(tuple(item)))
    return out


class LLMServer:
    """What a test gets from ``llm_server``: endpoints to script, the network, the verdict."""

    def __init__(self, server: FakeServer, proxy: FaultProxy) -> None:
        self.server = server
        self.proxy = proxy
        self.openai = ProviderEndpoint("openai", ("/v1/chat/completions",), "openai", self)
        self.responses = ProviderEndpoint("responses", ("/v1/responses",), "responses", self)
        self.anthropic = ProviderEndpoint("anthropic", ("/v1/messages",), "anthropic", self)
        gemini = "/v1beta/models/{model}"  # any model; google-genai's two methods
        self.gemini = ProviderEndpoint(
            "gemini",
            (f"{gemini}:streamGenerateContent", f"{gemini}:generateContent"),
            "gemini",
            self,
        )
        self.verdicts: list[AppVerdict] = []  # every verdict taken in this test, in order
        self._stopped_reading_at: float | None = None
        self._timer: threading.Timer | None = None

    def measure_lag(self, on: bool) -> None:
        """Probe the server's and proxy's loops into the ledger (the verdict's noise)."""
        self.server.measure_lag(on)
        self.proxy.measure_lag(on)

    @property
    def url(self) -> str:
        """The fault proxy's base URL: what the SDKs' base-URL variables point at."""
        return self.proxy.url

    @property
    def ledger(self) -> Ledger:
        """Every attempt (server) and connection (proxy) of this test."""
        return self.server.ledger

    def script(
        self,
        path: str,
        *steps: Step | Iterable[Step],
        method: Method = "ANY",
        then: Then = "repeat_last",
    ) -> None:
        """Script any path (see ``FakeServer.script``); the ledger starts empty again."""
        self.server.script(path, *_flatten(steps), method=method, then=then)

    def load(self, scenario: Scenario) -> None:
        """Replace every endpoint with a scenario (e.g. from ``fake_servers.load_scenario``)."""
        self.server.load(scenario)

    def weather(
        self, weather: str | Weather, *, streams: int = 100, seed: int = 0, scale: float = 1.0
    ) -> WeatherSession:
        """Play a network weather (docs/weather.md) instead of endpoints: stream ``n`` is at
        ``session.url(n)`` (a base URL; an SDK appends its API path, e.g. ``+ "/v1"`` for
        OpenAI's), ``session.record(n, text=...)`` or ``(n, error=...)`` says what the app
        got, and ``session.metrics().require("completion >= 0.99")`` judges the run.
        ``scale`` multiplies the weather's durations (0.01: a 60 s gap takes 0.6 s)."""
        from conformance.weather import get_weather
        from conformance.weather._session import WeatherSession

        chosen = get_weather(weather) if isinstance(weather, str) else weather
        if scale != 1.0:
            chosen = chosen.scaled(scale)
        return WeatherSession(self.server, self.url, chosen, streams=streams, seed=seed)

    # -- the network ------------------------------------------------------------------
    def offline(self, seconds: float | None = None) -> None:
        """Take the network away: refuse new connections and cut open ones.

        Args:
            seconds: Come back online by itself after this long; None stays offline
                until ``online()`` (or the end of the test).
        """
        self._cancel_timer()
        self.proxy.offline()
        if seconds is not None:
            timer = threading.Timer(seconds, self.proxy.online)
            timer.daemon = True
            timer.name = "llm-server-online"
            self._timer = timer
            timer.start()

    def online(self) -> None:
        """Bring the network back (the same URL)."""
        self._cancel_timer()
        self.proxy.online()

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            timer.join()

    # -- the verdict ---------------------------------------------------------------------
    def app_stopped_reading(self) -> None:
        """Say that the app stopped reading now: open streams must be closed promptly."""
        from fake_servers import now

        self._stopped_reading_at = now()

    def verdict(
        self,
        app_output: str | None = None,
        error: BaseException | str | None = None,
        profile: Profile | str | None = None,
        idempotent: bool | None = None,
        *,
        timing: Timing = "real",
        stall_timeout: float | None = None,
        stopped_reading_at: float | None = None,
        settle: float | None = None,
    ) -> AppVerdict:
        """Judge what the client did in this test (see ``conformance._verdict.judge``).

        Args:
            app_output: The text the app produced, when it returned normally.
            error: The exception (or message) the app raised, if it raised.
            profile: A profile (or its name) the client claims to follow.
            idempotent: False when the call must not run twice.
            timing: The profile's timing the client was configured with.
            stall_timeout: The silence (s) after which the app promises to abandon a stream.
            stopped_reading_at: When the app stopped reading (default: the last
                ``app_stopped_reading()``).
            settle: Longest wait (s) for attempts still in flight to end before judging;
                by default 0.5 s, or until 0.5 s after the app stopped reading.

        Returns:
            The verdict; ``verdict.assert_ok()`` fails the test on a MUST finding.
        """
        from conformance._profiles import get_profile
        from conformance._verdict import judge
        from conformance.timing import UNMEASURED_SLACK
        from fake_servers import LedgerTimeout, now

        mark = stopped_reading_at if stopped_reading_at is not None else self._stopped_reading_at
        if settle is None:
            settle = UNMEASURED_SLACK
            if mark is not None:  # wait out the close's deadline, or judging is premature
                settle = max(0.0, mark + UNMEASURED_SLACK - now()) + 0.01
        with contextlib.suppress(LedgerTimeout):  # still open when judged: rules say what it means
            self.ledger.wait_finished(settle)
        if any(not a.finished for a in self.ledger.attempts()):
            # A probe records a stall only when it wakes: a server loop stalled right now
            # would show no lag while its close waits behind the stall (beside 2 CPU
            # burners a correct close was judged "still open" so). Judge once every
            # probed loop has turned since, and the close had that turn to land.
            _probes_past(self.ledger, now(), PROBES_PATIENCE)
            # A stall they now show widens the close's deadline: wait that out too, or
            # a client that never closes would be "too early to tell" (undecided). Lag
            # measured during the wait widens it again: a few rounds, then the rule says.
            for _ in range(DEADLINE_ROUNDS):
                due = 0.0 if mark is None else mark + self._noise().worst_slack() - now()
                if due <= 0:
                    break
                with contextlib.suppress(LedgerTimeout):
                    self.ledger.wait_finished(due + 0.01)
        result = judge(
            self.ledger.attempts(),
            scenario=self.server.scenario,
            app_output=app_output,
            error=error,
            profile=get_profile(profile) if isinstance(profile, str) else profile,
            timing=timing,
            idempotent=idempotent,
            stall_timeout=stall_timeout,
            stopped_reading_at=mark,
            judged_at=now(),
            noise=self._noise(),
        )
        self.verdicts.append(result)
        return result

    def _noise(self) -> Noise:
        """The harness lag measured so far. The server's and proxy's lag bound how late
        their stamps trail what the app saw (CI: a 503's headers stamped 31 ms after the
        app began its 0.2 s sleep); the app's own lateness is not probed."""
        from conformance.timing import Noise

        return Noise.from_ledger(self.ledger.lags(), client_probed=False)

    def __repr__(self) -> str:
        return f"<llm_server {self.url} attempts={len(self.ledger.attempts())}>"


def _probes_past(ledger: Ledger, moment: float, patience: float) -> None:
    """Wait until every lag probe of ``ledger`` has woken after ``moment``, at most
    ``patience`` seconds (nobody is notified of a wake-up, so this polls)."""
    from fake_servers import now

    deadline = now() + patience
    while now() < deadline:
        rows = ledger.lags().values()
        if all(r and r[-1][1] >= moment for r in rows):
            return
        time.sleep(PROBES_POLL)


class LLMSession:
    """The session's fake server and fault proxy (sharing one ledger)."""

    def __init__(self, server: FakeServer | None = None) -> None:
        from fake_servers import FakeServer

        self.server = server if server is not None else FakeServer()  # not started yet
        self.proxy: FaultProxy | None = None

    def start(self) -> LLMSession:
        from fake_servers import FaultProxy

        self.server.start()
        try:
            self.proxy = FaultProxy(self.server.url, ledger=self.server.ledger).start()
        except BaseException:
            self.server.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            if self.proxy is not None:
                self.proxy.stop()
        finally:
            self.server.stop()

    def fresh(self) -> LLMServer:
        """The pair, reset for a new test."""
        assert self.proxy is not None, "start() the session first"
        self.proxy.clear()  # online, passthrough, nothing queued
        self.server.reset()  # no endpoints, empty ledger, no weather's plan
        self.server.marked = False  # plain answers again after a test's weather
        return LLMServer(self.server, self.proxy)


def serve_test(
    session: LLMSession, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Generator[LLMServer, None, None]:
    """The body of the ``llm_server`` fixture: reset, environment, verdict at teardown."""
    llm = session.fresh()
    llm.measure_lag(True)
    for name, value in provider_environment(llm.url, dict(os.environ)).items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    try:
        yield llm
    finally:
        llm._cancel_timer()
        try:
            _record_verdict(llm, request)
        finally:
            llm.measure_lag(False)
    session.server.check()  # an exception inside the server fails the test here


def _record_verdict(llm: LLMServer, request: pytest.FixtureRequest) -> None:
    """With --streamcheck-verdicts, keep the test's (last, or a teardown) verdict."""
    from pytest_streamcheck._settings import verdicts_enabled

    if not verdicts_enabled(request.config):
        return
    verdict = llm.verdicts[-1] if llm.verdicts else llm.verdict()
    if not verdict.clean:  # a finding, or a rule load left undecided
        request.node.stash[VERDICT_ROW_KEY] = {
            "test": request.node.nodeid,
            **verdict.to_json(),
            "rendered": verdict.render(),
        }
