"""Rules that fit the transport and the client (issue 28): each scoping rule has a broken
client that FAILs and a correct one that PASSes, through the real runner (the
reference's own variants, in virtual time).

- ``raw_events`` is split: a client that hands over data alone is judged on every row
  that expects no event type and no id, and UNSUPPORTED on the others;
- the cache headers are EventSource's: their POST cases do not apply;
- a client that cannot send multipart bodies is UNSUPPORTED on SC-POST-2, never FAIL;
- a 409 is never retried, whatever a library's own profile says;
- the attempt limit is judged only where a limit, not the status, stops the retries.
The zoo's ``cache_control_no_store``, ``new_boundary_per_attempt``, ``retries_409`` and
``retries_408`` are the broken clients of the other rules (docs/zoo.md).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from conformance import ADAPTER_API, AdapterInfo, all_cases, get_case, run_suite
from conformance._adapter import AdapterRequest, StreamSink
from conformance._case import Verdict
from conformance._result import CaseResult
from pytest_streamcheck.targets._exec_protocol import ProtocolError, parse_hello
from pytest_streamcheck.targets._reference import ReferenceAdapter

FIELD_ROWS = [c.id for c in all_cases() if "raw_data" in c.needs and c.transport == "get"]


class DataOnly(ReferenceAdapter):
    """Hands its consumer each event's data, as the wire had it, and nothing else."""

    info = replace(
        ReferenceAdapter.info,
        name="data-only",
        capabilities=ReferenceAdapter.info.capabilities - {"event_fields"},
    )

    def mangle(self, data: str) -> str:
        return data

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        given = sink.chunk

        def chunk(data: str, **_: object) -> None:
            given(self.mangle(data))

        sink.chunk = chunk  # type: ignore[method-assign]
        await super().stream(request, sink)


class TrimsData(DataOnly):
    """A data-only client that trims the spaces around each event's data."""

    info = replace(DataOnly.info, name="trims-data")

    def mangle(self, data: str) -> str:
        return data.strip()


def _verdicts(results: tuple[CaseResult, ...]) -> dict[str, CaseResult]:
    return {r.case.id: r for r in results}


def _run(
    factory: type[ReferenceAdapter], *ids: str, profile: str | None = None
) -> dict[str, CaseResult]:
    return _verdicts(run_suite(factory, select=ids, timing="virtual", lanes=1, profile=profile))


def test_a_data_only_client_is_judged_on_every_row_of_data_alone() -> None:
    results = _run(DataOnly, *FIELD_ROWS)
    assert set(results) == set(FIELD_ROWS)
    judged = [i for i in FIELD_ROWS if "event_fields" not in get_case(i).needs]
    assert len(judged) >= 13
    for case_id, result in results.items():
        if case_id in judged:
            assert result.verdict is Verdict.PASS, (case_id, result.reason)
        else:
            assert result.verdict is Verdict.UNSUPPORTED, (case_id, result.reason)
            assert "event_fields" in result.reason


def test_a_data_only_client_that_changes_the_data_fails() -> None:
    results = _run(TrimsData, *FIELD_ROWS)
    failed = [i for i, r in results.items() if r.verdict is Verdict.FAIL]
    assert failed, {i: r.verdict for i, r in results.items()}
    assert all("event_fields" not in get_case(i).needs for i in failed)


def test_the_cache_headers_are_judged_on_the_eventsource_transport_only() -> None:
    results = _run(ReferenceAdapter, "SC-SSE-21", "SC-SSE-22", "SC-SSE-23", "SC-SSE-24")
    assert results["SC-SSE-21"].verdict is Verdict.PASS
    assert results["SC-SSE-23"].verdict is Verdict.PASS
    for post in ("SC-SSE-22", "SC-SSE-24"):
        assert results[post].verdict is Verdict.UNSUPPORTED
        assert "an EventSource rule" in results[post].reason


class JsonOnly(ReferenceAdapter):
    """A client of the current adapter API that sends JSON bodies alone."""

    info = replace(
        ReferenceAdapter.info,
        name="json-only",
        capabilities=ReferenceAdapter.info.capabilities - {"multipart"},
    )


def test_a_client_that_cannot_send_multipart_is_unsupported_not_failed() -> None:
    result = _run(JsonOnly, "SC-POST-2")["SC-POST-2"]
    assert result.verdict is Verdict.UNSUPPORTED
    assert "multipart" in result.reason
    assert _run(ReferenceAdapter, "SC-POST-2")["SC-POST-2"].verdict is Verdict.PASS


def _api_1_info() -> AdapterInfo:
    """An adapter's info as written against the previous release: no ``api``, and
    capabilities named as API 1 named them."""
    with pytest.warns(DeprecationWarning, match="read as API 1"):
        return AdapterInfo(name="old", capabilities={"get", "post", "raw_events", "resume"})


def test_an_adapter_of_the_previous_api_keeps_its_capabilities_and_verdicts() -> None:
    info = _api_1_info()
    assert info.api == 1
    assert {"multipart", "raw_data", "event_fields"} <= info.capabilities

    class Old(ReferenceAdapter):
        pass

    Old.info = replace(ReferenceAdapter.info, name="old", api=1)
    results = _run(Old, "SC-POST-2", "SC-SSE-3", "SC-SSE-41")
    assert {i: r.verdict for i, r in results.items()} == dict.fromkeys(results, Verdict.PASS)


def test_an_api_the_kit_does_not_run_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"adapter API 3 is not one this kit runs \(1, 2\)"):
        AdapterInfo(name="future", api=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert AdapterInfo(name="new", api=ADAPTER_API).api == ADAPTER_API  # no warning
    with pytest.raises(ProtocolError, match=r"hello\.api"):
        parse_hello({"protocol": 1, "api": 7, "capabilities": ["get"]}, "argv0")
    info, _ = parse_hello({"protocol": 1, "capabilities": ["post"]}, "argv0")
    assert info.api == 1  # an exec client of API 1
    assert "multipart" in info.capabilities


def test_a_409_is_never_retried_whatever_the_library_profile_says() -> None:
    """openai-python's profile retries a 409, as the SDK does: the seeds do not."""
    result = _run(ReferenceAdapter, "SC-RETRY-42", profile="openai-python")["SC-RETRY-42"]
    assert result.verdict is Verdict.FAIL
    assert result.outcome is not None
    assert "the seed's matrix decides" in str(result.outcome)
    seed = _run(ReferenceAdapter, "SC-RETRY-41", "SC-RETRY-42")
    assert {r.verdict for r in seed.values()} == {Verdict.PASS}


def test_the_attempt_limit_is_judged_only_where_a_limit_stops_the_retries() -> None:
    """SC-RETRY-35/36 want ``gave_up`` once the limit is reached. A profile of one attempt
    retries nothing, so its 502 is a status it never retries (``non_retryable_status``,
    as docs/adapters.md says): the rule does not apply. A new user's httpx-sse-like
    profile FAILed a correct report there. Under a limit that stops retries the rule is
    judged (the zoo's ``unbounded_retries`` FAILs it)."""
    ids = ("SC-RETRY-35", "SC-RETRY-36")
    one = _run(ReferenceAdapter, *ids, profile="httpx-sse")
    assert {(r.verdict, r.skip) for r in one.values()} == {(Verdict.UNSUPPORTED, "profile")}
    assert all("allows no retry" in r.reason for r in one.values())
    limited = _run(ReferenceAdapter, *ids, profile="seed-pipeline")
    assert {r.verdict for r in limited.values()} == {Verdict.PASS}


def test_a_request_field_newer_than_the_adapter_api_is_unsupported_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were ``comments`` added in a later API, an adapter of this one would ignore it:
    the cases that set it are UNSUPPORTED and say which field, never judged."""
    from conformance._case import REQUEST_FIELDS_SINCE

    monkeypatch.setitem(REQUEST_FIELDS_SINCE, "comments", ADAPTER_API + 1)
    results = _run(ReferenceAdapter, "SC-SSE-73", "SC-SSE-41")
    unsupported = results["SC-SSE-73"]
    assert unsupported.verdict is Verdict.UNSUPPORTED
    assert f"StreamRequest.comments (adapter API {ADAPTER_API + 1})" in unsupported.reason
    assert unsupported.skip == "capability"  # the rule applies: it went unjudged
    assert results["SC-SSE-41"].verdict is Verdict.PASS  # a request without it: judged


def test_a_real_library_s_long_timeout_is_a_profile_virtual_time_judges() -> None:
    """A 6000 s silence timeout (a real library's) loads, and virtual time waits it out."""
    from conformance import get_profile
    from conformance._runner import VIRTUAL_LIMIT, virtual_limit

    seed = get_profile("seed-eventsource")
    policy = replace(seed.policy, stall_timeout=6000.0, stall_check_interval=10.0)
    long = replace(seed, name="long-silence", policy=policy)
    assert virtual_limit(policy) == 24000.0 > VIRTUAL_LIMIT
    results = run_suite(ReferenceAdapter, profile=long, select=["SC-STALL-3"], timing="virtual")
    assert [r.verdict for r in results] == [Verdict.PASS], [r.reason for r in results]


@pytest.mark.parametrize(
    ("preset", "profile"),
    [("eventsource", "seed-eventsource"), ("fetch", "seed-fetch"), ("pipeline", "seed-pipeline")],
)
def test_the_removed_seed_presets_are_back_for_a_release_with_a_warning(
    preset: str, profile: str
) -> None:
    from conformance import get_profile
    from conformance.reference import ClientPolicy

    with pytest.warns(DeprecationWarning, match=rf"ClientPolicy\.{preset}\(\) is deprecated"):
        policy = getattr(ClientPolicy, preset)()
    assert policy == get_profile(profile).policy


def test_every_request_field_says_which_api_added_it() -> None:
    """A field added to StreamRequest without its API would never be gated."""
    from dataclasses import fields

    from conformance._case import REQUEST_FIELDS_SINCE, StreamRequest

    assert set(REQUEST_FIELDS_SINCE) == {f.name for f in fields(StreamRequest)}
