"""The pytest11 entry point: options, hooks and fixtures only; heavy work lives elsewhere.

Without ``--streamcheck`` (or its ini twin) the hooks return at once and change
nothing in a user's run; the kit's modules are imported only when needed.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from fake_servers import FakeServer, FaultProxy
    from pytest_streamcheck._llm import LLMServer, LLMSession
    from pytest_streamcheck._session import StreamcheckSession

STATE_KEY: pytest.StashKey[StreamcheckSession] = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_streamcheck._settings import FLAGS, METAVARS, OPTIONS

    group = parser.getgroup(
        "streamcheck", "streamcheck: conformance of resilient streaming clients"
    )
    for option, ini, text in OPTIONS:
        if option in FLAGS:
            group.addoption(option, action="store_true", default=False, dest=ini, help=text)
            parser.addini(ini, text, type="bool", default=False)
        else:
            group.addoption(option, dest=ini, default=None, metavar=METAVARS[option], help=text)
            parser.addini(ini, text, default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "streamcheck: a conformance case of pytest-streamcheck")
    from pytest_streamcheck._settings import report_path, resolve_settings, verdicts_enabled

    settings = resolve_settings(config)
    verdicts = verdicts_enabled(config)
    if settings is None:
        if verdicts:  # the app verdicts of llm_server tests, without the suite
            from pytest_streamcheck.reports._report import Reporter

            reporter = Reporter(None, verdicts=True, path=report_path(config))
            config.pluginmanager.register(reporter, "streamcheck-reporter")
        return
    from pytest_streamcheck._session import StreamcheckSession
    from pytest_streamcheck.targets import TargetError

    try:
        state = config.stash[STATE_KEY] = StreamcheckSession(settings)
    except TargetError as exc:
        raise pytest.UsageError(f"--streamcheck: {exc}") from None
    from pytest_streamcheck._select import marker_lines, take_case_args
    from pytest_streamcheck.reports._junit import JunitFields
    from pytest_streamcheck.reports._report import Reporter

    # Only in a streamcheck run: a host project's markers stay its own.
    for line in marker_lines(state.cases):
        config.addinivalue_line("markers", line)
    state.selected = take_case_args(config)  # streamcheck::SC-AREA-N on the command line
    state.keyword = config.option.keyword or None
    state.markexpr = config.option.markexpr or None
    reporter = Reporter(state, verdicts=verdicts, path=report_path(config))
    config.pluginmanager.register(reporter, "streamcheck-reporter")
    config.pluginmanager.register(JunitFields(config), "streamcheck-junit")
    if settings.certify is not None:  # --streamcheck-certify DIR: the bundle (_certify)
        from pytest_streamcheck._certify import Certifier

        certifier = Certifier(state, reporter, settings.certify)
        config.pluginmanager.register(certifier, "streamcheck-certify")


def pytest_report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return None
    from pytest_streamcheck._settings import DEFAULT_PROFILES

    s = state.settings
    profiles = (
        ", ".join(p.key for p in s.profiles)
        if s.profiles
        else f"the client's, else {DEFAULT_PROFILES.replace(',', ', ')}"
    )
    timing = s.timing or "auto"
    weather = f" weather={','.join(s.weathers)}" if s.weathers else ""
    return (
        f"streamcheck: target={s.target} profiles={profiles} timing={timing} seed={s.seed}{weather}"
    )


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    # With --streamcheck and no paths on the command line, run only the suite.
    if STATE_KEY in config.stash and config.args_source != pytest.Config.ArgsSource.ARGS:
        return True
    return None


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    # How many cases will run, and how to watch them: -v names each case as it starts.
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return None
    from pytest_streamcheck._items import CaseItem
    from pytest_streamcheck._weather_item import WeatherItem

    count = sum(isinstance(item, CaseItem) for item in items)
    weathers = sum(isinstance(item, WeatherItem) for item in items)
    also = f" and {weathers} weather test(s)" if weathers else ""
    watch = "; -v names each case as it runs" if config.get_verbosity() == 0 else ""
    return f"streamcheck: {count} of {len(state.cases)} cases selected{also}{watch}"


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselection sees the items
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    from pytest_streamcheck._items import make_items

    suite = make_items(session, state)
    items.extend(suite)
    # Report them as a collector would, so the "collected N items" line counts them.
    config.hook.pytest_collectreport(
        report=pytest.CollectReport("streamcheck", "passed", None, list(suite))
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    # The adapters close as this process's last case ends (_items.CaseItem.setup), so
    # that an aclose() failure is in its row and an ERROR at its teardown.
    if STATE_KEY in item.config.stash:
        from pytest_streamcheck._items import LAST

        item.stash[LAST] = nextitem is None
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    # This process's last test (its teardown is where pytest ends session fixtures):
    # the adapters close, if its own setup did not close them, and an aclose() failure
    # is this test's ERROR at teardown instead of nothing at all.
    state = item.config.stash.get(STATE_KEY, None)
    try:
        return (yield)
    finally:
        failed = state.close() if state is not None and nextitem is None else ""
        if failed:
            pytest.fail(failed, pytrace=False)


@pytest.hookimpl(tryfirst=True)  # before the reports are written
def pytest_sessionfinish(session: pytest.Session) -> None:
    # A run stopped before its last test (-x, --maxfail, Ctrl-C) closes the adapters
    # here: an aclose() failure is still said, and fails a run that would pass.
    state = session.config.stash.get(STATE_KEY, None)
    failed = state.close() if state is not None else ""
    if not failed:
        return
    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.write_line(f"streamcheck: ERROR {failed}", red=True)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if STATE_KEY not in item.config.stash:
        return report  # not a streamcheck run: change nothing
    from pytest_streamcheck._items import CaseItem, keep_line

    if not isinstance(item, CaseItem):
        return report
    if call.when != "call" and report.failed and call.excinfo:
        # pytest renders setup and teardown errors as tracebacks; a case's ERROR (an
        # adapter's failed aclose() at the last case's teardown too) has its own text.
        report.longrepr = item.repr_failure(call.excinfo)
    keep_line(report)  # the case's row goes on the report in _report.Reporter
    return report


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(
    config: pytest.Config, data: dict[str, Any]
) -> Generator[None, object, object]:
    report = yield
    if STATE_KEY in config.stash and isinstance(report, pytest.TestReport):
        from pytest_streamcheck._items import restore_repr

        restore_repr(report)  # xdist sent a case's failure as a plain string
    return report


# -- fixtures for downstream regression tests -----------------------------------------
# Configured the pytest way (as pytest-httpserver's httpserver_listen_address): a project
# overrides the small fixture fake_server_options in its conftest.py.


@pytest.fixture(scope="session")
def fake_server_options() -> dict[str, Any]:
    """Keyword arguments for the session's ``FakeServer`` (``fake_server``, ``llm_server``).

    None by default. Override it in a ``conftest.py`` to configure the server::

        @pytest.fixture(scope="session")
        def fake_server_options():
            return {"max_body_bytes": 1_000_000, "body_timeout": 2.0}
    """
    return {}


def _server(options: dict[str, Any]) -> FakeServer:
    from fake_servers import FakeServer

    try:
        return FakeServer(**options)
    except TypeError as exc:  # say where the bad keyword came from
        raise TypeError(f"fake_server_options: {exc}") from None


@pytest.fixture(scope="session")
def streamcheck_server_session(fake_server_options: dict[str, Any]) -> Iterator[FakeServer]:
    """One fake server for the whole session; use ``fake_server`` in tests."""
    server = _server(fake_server_options).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_server(streamcheck_server_session: FakeServer) -> Iterator[FakeServer]:
    """A running fake server with no endpoints and an empty ledger.

    Script it with ``fake_server.script(path, *steps)`` or ``fake_server.load(scenario)``.
    Errors raised inside the server surface in the test at teardown.
    """
    server = streamcheck_server_session
    server.reset()
    yield server
    server.check()


@pytest.fixture
def fault_proxy(fake_server: FakeServer) -> Iterator[FaultProxy]:
    """A TCP fault proxy in front of ``fake_server``, recording into the same ledger.

    One per test, unlike the server: starting one costs well under a millisecond (as
    little as clearing a shared one), and a fresh port and thread let nothing a test did
    to it (stop(), a pooled connection) reach the next test.
    """
    from fake_servers import FaultProxy

    proxy = FaultProxy(fake_server.url, ledger=fake_server.ledger).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="session")
def streamcheck_llm_session(fake_server_options: dict[str, Any]) -> Iterator[LLMSession]:
    """One fake server and fault proxy for the session; use ``llm_server`` in tests."""
    from pytest_streamcheck._llm import LLMSession

    session = LLMSession(_server(fake_server_options)).start()
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def llm_server(
    streamcheck_llm_session: LLMSession,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Iterator[LLMServer]:
    """Provider endpoints behind a fault proxy, for application code left unchanged.

    Reset for each test; sets OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL
    and dummy API keys (restored afterwards). Script with ``llm_server.openai.script(...)``
    (``.responses``, ``.anthropic``, ``.gemini``), break the network with
    ``llm_server.offline(seconds)``, and judge the client with ``llm_server.verdict(...)``.
    """
    from pytest_streamcheck._llm import serve_test

    yield from serve_test(streamcheck_llm_session, monkeypatch, request)
