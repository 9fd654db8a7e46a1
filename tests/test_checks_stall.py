"""The stall, offline and cancel checks on hand-built records: a correct client passes,
each mistake fails, and the harness's measured noise makes a check undecidable, never a
false FAIL (``conformance.timing``).

Evidence carries quiet measured noise unless a test says otherwise: the measured path
is the one the runner takes. ``Noise()`` (unmeasured) keeps the stated 0.5 s slack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from _records import request_record
from test_timing import BLOCK, QUIET_LAG, noisy_noise, quiet, quiet_noise

from conformance import Delivery, Evidence, Outcome, get_case
from conformance._checks import reaction_resolution
from conformance._profiles import get_profile
from conformance.cases.cancel import closed_by_client_within
from conformance.cases.offline import (
    KIT,
    OFFLINE,
    OFFLINE_SENT,
    ONLINE,
    ONLINE_BACK,
    closed_after,
    quiet_between,
    reconnect_resolution,
    reconnected_within,
)
from conformance.cases.stall import (
    CONNECT_ALLOWANCE,
    abandoned_in_window,
    kept_through_silence,
    last_activity,
    received_by,
    stalled_state_before_close,
)
from conformance.timing import (
    AT_ONCE,
    LAG_FACTOR,
    LOWER_FLOOR,
    PATH_FLOOR,
    UNMEASURED_SLACK,
    Noise,
)
from fake_servers import Attempt, Connection, SentEvent

EVENTSOURCE = get_profile("seed-eventsource").at("test")
PIPELINE = get_profile("seed-pipeline").at("test")
TOKENS = [f"tok{i}" for i in range(1, 7)]


def tuned(case_id: str, policy=EVENTSOURCE):
    case = get_case(case_id)
    assert case.tune is not None
    return case.tune(policy)


SHORT = tuned("SC-STALL-3")  # timeout 0.3 s
T, EVERY = SHORT.stall_timeout, SHORT.stall_check_interval
QUIET = quiet_noise(-1.0, 5.0)
UNMEASURED = Noise()
# How late an end stamp can trail what ended on a quiet machine: the path floor and
# three loops' lag (what ``span`` takes off its least).
QUIET_END = PATH_FLOOR + LAG_FACTOR * 3 * QUIET_LAG
REACT = reaction_resolution(EVENTSOURCE)  # 0.2 s: a prompt reaction takes AT_ONCE of it


def attempt(
    seq: int = 1,
    events: Sequence[tuple[int, float]] = (),
    *,
    comments: Sequence[float] = (),
    arrived: float = 0.0,
    headers: float | None = 0.001,
    ended: float | None = None,
    end: str | None = "client_closed",
) -> Attempt:
    """An attempt; ``events`` are (index, sent at) data events."""
    sent = [SentEvent(i, "data", None, TOKENS[i - 1], at) for i, at in events]
    sent += [SentEvent(0, "comment", None, "keepalive", at) for at in comments]
    return request_record(
        seq,
        arrived_at=arrived,
        step=seq - 1,
        status=200,
        headers_at=headers,
        events=tuple(sorted(sent, key=lambda e: e.at)),
        ended_at=ended,
        end=end,
    )


def chunks(*indexes: int, at: float = 0.01) -> list[Delivery]:
    return [
        Delivery("s1", "chunk", at + 0.001 * n, data=TOKENS[i - 1]) for n, i in enumerate(indexes)
    ]


def state(name: str, at: float, stream: str = "s1") -> Delivery:
    return Delivery(stream, "state", at, state=name)


def done(at: float, stream: str = "s1") -> Delivery:
    return Delivery(stream, "done", at)


def stalled_error(at: float) -> Delivery:
    return Delivery("s1", "error", at, error="stalled")


def kit(what: str, at: float) -> Delivery:
    return Delivery(KIT, "log", at, data=what)


def evidence(attempts, deliveries=(), connections=(), noise: Noise | None = None) -> Evidence:
    """Records with quiet measured noise over them, or ``noise``."""
    ev = Evidence(tuple(attempts), tuple(connections), tuple(deliveries))
    return quiet(ev) if noise is None else replace(ev, noise=noise)


def blocked(at: float, seconds: float = BLOCK, source: str = "client") -> Noise:
    """Quiet noise, but for the ``source`` loop blocked ``seconds`` from ``at``."""
    return noisy_noise(-1.0, 5.0, [(at, seconds)], source)


def failed(outcome: Outcome) -> bool:
    """A decisive FAIL: not ok, and not for the harness's noise."""
    return not outcome.ok and not outcome.undecidable


def connection(seq: int, opened: float, closed: float | None = None, fault: str = "") -> Connection:
    return Connection(seq, opened, ("127.0.0.1", 40000 + seq), fault, closed_at=closed)


class TestLastActivity:
    def test_bytes_counts_headers_comments_and_data(self):
        """Under rule "bytes" the latest of headers, comments and data resets the timer."""
        a = attempt(events=[(1, 0.1)], comments=[0.2, 0.3])
        assert last_activity(a, "bytes", until=1.0) == 0.3

    def test_data_counts_data_events_only(self):
        """Under rule "data" keepalive comments and headers do not reset the timer."""
        a = attempt(events=[(1, 0.1)], comments=[0.2, 0.3])
        assert last_activity(a, "data", until=1.0) == 0.1

    def test_only_what_was_sent_before_the_moment_counts(self):
        """Events after ``until`` are ignored."""
        a = attempt(events=[(1, 0.1), (2, 0.5)])
        assert last_activity(a, "bytes", until=0.4) == 0.1

    def test_data_before_any_data_allows_for_the_connect(self):
        """With no data yet, a data timer may have started before the request arrived."""
        a = attempt(arrived=1.0, headers=1.01)
        assert last_activity(a, "data", until=5.0) == 1.0 - CONNECT_ALLOWANCE


class TestAbandonedInWindow:
    def test_closed_after_timeout_and_one_interval_passes(self):
        """A close between the timeout and timeout + interval after the last byte passes."""
        a = attempt(events=[(1, 0.1), (2, 0.1)], ended=0.1 + T + EVERY / 2)
        outcome = abandoned_in_window(a, SHORT, QUIET)
        assert outcome.ok
        assert not outcome.undecidable

    def test_late_within_the_quiet_path_floor_passes(self):
        """A close late by less than the quiet path floor still passes."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T + EVERY + PATH_FLOOR - 0.005)
        assert abandoned_in_window(a, SHORT, QUIET).ok

    def test_unmeasured_noise_allows_the_stated_slack(self):
        """Without measured noise a close late by less than UNMEASURED_SLACK passes, and a
        later one fails: the app-level slack."""
        late = attempt(events=[(1, 0.1)], ended=0.1 + T + EVERY + UNMEASURED_SLACK - 0.01)
        assert abandoned_in_window(late, SHORT, UNMEASURED).ok
        later = attempt(events=[(1, 0.1)], ended=0.1 + T + EVERY + UNMEASURED_SLACK + 0.01)
        assert failed(abandoned_in_window(later, SHORT, UNMEASURED))

    @pytest.mark.parametrize("noise", [QUIET, UNMEASURED], ids=["quiet", "unmeasured"])
    def test_closed_before_the_timeout_fails(self, noise):
        """A client that gives up before the timeout fails: only the clock floor and the
        server's lag are allowed below it."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T - 2 * LOWER_FLOOR)
        outcome = abandoned_in_window(a, SHORT, noise)
        assert failed(outcome)
        assert "0.296s of silence" in outcome.observed

    def test_closed_too_late_fails(self):
        """A close later than timeout + interval + the quiet path floor fails."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T + EVERY + PATH_FLOOR + 0.01)
        assert failed(abandoned_in_window(a, SHORT, QUIET))

    def test_bytes_that_reached_the_client_late_count_from_its_delivery(self):
        """A browser's bytes crossed its network process 0.11 s after the server sent
        them (SC-STALL-4 in CI): a close timed from the page's delivery is no FAIL, but
        undecidable (when the client had the bytes is known to 0.11 s: re-judged at a
        coarser scale), and one delivered at once passes."""
        sent, delivered = 0.05, 0.16
        a = attempt(events=[(1, sent), (2, sent)], ended=delivered + T + EVERY / 2)
        ev = evidence([a], chunks(1, 2, at=delivered - 0.001))
        received = received_by(ev, a, SHORT, "s1")
        assert received == pytest.approx(delivered)
        assert failed(abandoned_in_window(a, SHORT, QUIET))  # from the server's stamp
        assert abandoned_in_window(a, SHORT, QUIET, received).undecidable
        prompt = attempt(events=[(1, sent), (2, sent)], ended=sent + T + EVERY / 2)
        ev = evidence([prompt], chunks(1, 2, at=sent + 0.001))
        assert abandoned_in_window(prompt, SHORT, QUIET, received_by(ev, prompt, SHORT, "s1")).ok

    def test_a_late_close_still_fails_from_the_delivery(self):
        """The delivery bounds when the client had the bytes: a close a whole interval
        late from it is still a FAIL, and one too early is judged from the server."""
        a = attempt(events=[(1, 0.05), (2, 0.05)], ended=0.16 + T + EVERY + PATH_FLOOR + 0.02)
        ev = evidence([a], chunks(1, 2, at=0.159))
        assert failed(abandoned_in_window(a, SHORT, QUIET, received_by(ev, a, SHORT, "s1")))
        early = attempt(events=[(1, 0.05), (2, 0.05)], ended=0.05 + T - 2 * LOWER_FLOOR)
        ev = evidence([early], chunks(1, 2, at=0.06))
        assert failed(abandoned_in_window(early, SHORT, QUIET, received_by(ev, early, SHORT, "s1")))

    def test_a_head_that_reached_the_client_late_counts_from_when_its_fetch_resolved(self):
        """CI beside 2 burners: a page's POST stalled after its head, which reached the
        page's code 90 ms after the server sent it (its fetch resolved then: measured,
        ``Noise.head_seen``); the page closed 305 ms after that. From the server's stamp
        that is late; from the measured head, no FAIL. Unmeasured, as before."""
        bytes_rule = replace(SHORT, idle_rule="bytes")
        a = attempt(headers=0.02, ended=0.11 + T + EVERY / 2)
        ev = evidence([a])
        assert received_by(ev, a, bytes_rule, "s1") is None
        assert failed(abandoned_in_window(a, bytes_rule, QUIET))
        seen = replace(ev, noise=replace(ev.noise, heads={a.seq: 0.11}))
        received = received_by(seen, a, bytes_rule, "s1")
        assert received == pytest.approx(0.11)
        assert not failed(abandoned_in_window(a, bytes_rule, QUIET, received))
        late = attempt(headers=0.02, ended=0.11 + T + EVERY + PATH_FLOOR + 0.02)
        seen_late = replace(evidence([late]), noise=replace(ev.noise, heads={late.seq: 0.11}))
        got = received_by(seen_late, late, bytes_rule, "s1")
        assert failed(abandoned_in_window(late, bytes_rule, QUIET, got))

    def test_the_delivery_counts_only_for_the_send_that_reset_the_timer(self):
        """A chunk missing, a keepalive after the data (rule "bytes"), or a later attempt:
        when the client had the last byte is not known from the deliveries."""
        a = attempt(events=[(1, 0.05), (2, 0.06)], ended=1.0)
        assert received_by(evidence([a], chunks(1, at=0.2)), a, SHORT, "s1") is None
        kept = attempt(events=[(1, 0.05)], comments=[0.1], ended=1.0)
        assert received_by(evidence([kept], chunks(1, at=0.2)), kept, SHORT, "s1") is None
        second = attempt(2, events=[(1, 0.05)], ended=1.0)
        ev = evidence([a, second], chunks(1, 2, at=0.2))
        assert received_by(ev, second, SHORT, "s1") is None

    def test_never_closed_fails(self):
        """A silent connection the client never closed fails."""
        a = attempt(events=[(1, 0.1)], ended=None, end=None)
        outcome = abandoned_in_window(a, SHORT, QUIET)
        assert failed(outcome)
        assert "still open" in outcome.observed

    def test_closed_by_the_server_is_not_an_abandonment(self):
        """An attempt the server completed was not abandoned by the client."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T, end="completed")
        assert failed(abandoned_in_window(a, SHORT, QUIET))

    def test_before_the_first_chunk_the_headers_start_the_silence(self):
        """Under "bytes", silence before the first chunk counts from the headers."""
        a = attempt(headers=0.05, ended=0.05 + T + 0.01)
        assert abandoned_in_window(a, SHORT, QUIET).ok
        early = attempt(headers=0.05, ended=0.05 + T - 0.01)
        assert failed(abandoned_in_window(early, SHORT, QUIET))

    def test_data_rule_ignores_keepalives(self):
        """Under "data", keepalive comments do not move the window."""
        policy = tuned("SC-STALL-9", PIPELINE)
        t = policy.stall_timeout
        a = attempt(events=[(1, 0.1)], comments=[0.2, 0.3, 0.4], ended=0.1 + t + 0.01)
        assert abandoned_in_window(a, policy, QUIET).ok

    def test_a_close_the_harness_delayed_is_undecidable(self):
        """A correct client whose close the client loop held back 200 ms: as late as a
        missed check, so undecidable, never FAIL."""
        due = 0.1 + T + EVERY / 2
        a = attempt(events=[(1, 0.1)], ended=due + BLOCK)
        outcome = abandoned_in_window(a, SHORT, blocked(due))
        assert outcome.undecidable
        assert not outcome.ok
        assert "client loop" in "\n".join(outcome.details)

    def test_a_block_mid_silence_that_made_every_later_check_late_is_never_a_fail(self):
        """The client loop stalled in the middle of the silence, not near its end: every
        stall check after it runs late by the stall, so the close is as late (CI: 371 ms
        past the window, a 316 ms stall mid-silence). Undecidable, never FAIL."""
        due = 0.1 + T + EVERY / 2
        a = attempt(events=[(1, 0.1)], ended=due + BLOCK)
        outcome = abandoned_in_window(a, SHORT, blocked(0.1 + T / 3))
        assert not failed(outcome)
        assert outcome.undecidable

    def test_a_close_far_past_a_mid_silence_block_still_fails(self):
        """Load never excuses a client that sat through far more than the stall: the same
        block mid-silence, a close a whole second late."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T + EVERY + 1.0)
        assert failed(abandoned_in_window(a, SHORT, blocked(0.1 + T / 3)))

    def test_an_early_close_fails_under_the_same_block(self):
        """Giving up at half the timeout fails decisively, blocked client loop or not: the
        server's stamps bound the silence from above."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T / 2)
        assert failed(abandoned_in_window(a, SHORT, blocked(0.1 + T / 2 - BLOCK)))

    def test_a_close_far_too_late_fails_under_moderate_noise(self):
        """Sitting through a whole second of silence fails despite 50 ms blocks near it."""
        a = attempt(events=[(1, 0.1)], ended=1.1)
        noise = noisy_noise(-1.0, 5.0, [(0.1 * k, 0.05) for k in range(20)])
        assert failed(abandoned_in_window(a, SHORT, noise))

    def test_a_server_block_at_the_last_byte_leaves_an_early_close_open(self):
        """The last byte's stamp may trail the byte by the server's lag: a close that is
        early only by the measured stamps is undecidable, not FAIL."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T - 0.05)
        outcome = abandoned_in_window(a, SHORT, blocked(0.1, 0.1, "server"))
        assert outcome.undecidable
        assert failed(abandoned_in_window(a, SHORT, QUIET))


class TestKeptThroughSilence:
    def test_read_to_the_end_passes(self):
        """One attempt, completed, every chunk once: the gap was waited out."""
        a = attempt(events=[(1, 0.1), (2, 0.7), (3, 0.7)], ended=0.71, end="completed")
        ev = evidence([a], [*chunks(1, 2, 3), done(0.72)])
        assert kept_through_silence(ev, tuned("SC-STALL-7")).ok

    def test_abandoned_during_a_gap_below_the_timeout_fails(self):
        """Closing 0.4 s into a 0.6 s gap under a 0.9 s timeout fails."""
        a = attempt(events=[(1, 0.1)], ended=0.5)
        ev = evidence([a], [*chunks(1), stalled_error(0.5)])
        outcome = kept_through_silence(ev, tuned("SC-STALL-7"))
        assert not outcome.ok
        assert "below" in outcome.observed

    def test_a_gap_the_server_stretched_past_the_timeout_is_not_held_against_the_client(self):
        """If the server itself went silent for the whole timeout, leaving was allowed."""
        policy = tuned("SC-STALL-7")
        a = attempt(events=[(1, 0.1)], ended=0.1 + policy.stall_timeout + 0.05)
        ev = evidence([a], [*chunks(1), stalled_error(1.1)])
        assert kept_through_silence(ev, policy).ok

    def test_a_reconnect_fails(self):
        """Replacing the connection is not waiting the gap out."""
        first = attempt(1, events=[(1, 0.1)], ended=1.2, end="completed")
        second = attempt(2, events=[(1, 1.3), (2, 1.3)], arrived=1.25, ended=1.31, end="completed")
        ev = evidence([first, second], [*chunks(1, 2), done(1.4)])
        assert not kept_through_silence(ev, tuned("SC-STALL-7")).ok

    def test_keepalives_count_as_activity_under_bytes(self):
        """A close 0.1 s after a keepalive is too early under rule "bytes"."""
        policy = tuned("SC-STALL-9")
        a = attempt(events=[(1, 0.1), (2, 0.1)], comments=[0.25, 0.4], ended=0.5)
        ev = evidence([a], [*chunks(1, 2), stalled_error(0.5)])
        assert not kept_through_silence(ev, policy).ok

    def test_keepalives_a_starved_client_loop_held_unread_leave_it_undecidable(self):
        """CI: the adapter's loop starved beside three other workers, its tick ran
        before the read it delayed, and the reference left a stream the server kept
        alive every 0.15 s. A loop late by the whole stretch it missed can hide the
        sends: undecidable, and re-judged; the same close on a quiet loop FAILs."""
        policy = tuned("SC-STALL-9")
        a = attempt(events=[(1, 0.1), (2, 0.1)], comments=[0.25, 0.4, 0.55], ended=0.6)
        ev = evidence([a], [*chunks(1, 2), stalled_error(0.6)])
        assert failed(kept_through_silence(ev, policy))
        starved = kept_through_silence(replace(ev, noise=blocked(0.2, 0.4)), policy)
        assert starved.undecidable
        assert "late" in starved.observed

    def test_a_stall_error_after_the_server_sent_everything_is_judged_by_its_moment(self):
        """The server sent the whole answer and ended the attempt, and the client's
        starved loop surfaced "stalled" later: the error's moment stands for the close.
        A quiet loop cannot excuse it; one blocked over the stretch can."""
        policy = tuned("SC-STALL-9")
        comments = [0.1 + 0.15 * k for k in range(1, 6)]
        a = attempt(
            events=[(1, 0.1), (2, 0.1), (3, 0.86), (4, 0.86)],
            comments=comments,
            ended=0.861,
            end="completed",
        )
        ev = evidence([a], [*chunks(1, 2), stalled_error(1.08)])
        quiet_outcome = kept_through_silence(ev, policy)
        assert failed(quiet_outcome)
        assert "below" in quiet_outcome.observed
        assert kept_through_silence(replace(ev, noise=blocked(0.6, 0.5)), policy).undecidable


class TestStalledState:
    def test_a_stalled_state_during_the_silence_passes(self):
        """The state arrives after the last byte and before the close."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T + EVERY)
        ev = evidence([a], [*chunks(1, at=0.11), state("stalled", 0.1 + EVERY)])
        assert stalled_state_before_close(ev, SHORT).ok

    def test_no_stalled_state_fails(self):
        """Abandoning without ever surfacing the stall fails."""
        a = attempt(events=[(1, 0.1)], ended=0.1 + T + EVERY)
        ev = evidence([a], [*chunks(1, at=0.11), state("failed", 0.1 + T + EVERY)])
        outcome = stalled_state_before_close(ev, SHORT)
        assert not outcome.ok
        assert "failed" in outcome.observed

    def test_a_stalled_state_after_the_close_fails(self):
        """Saying "stalled" only once the connection is gone is not before acting on it."""
        a = attempt(events=[(1, 0.1)], ended=0.5)
        ev = evidence([a], [*chunks(1, at=0.11), state("stalled", 0.6)])
        assert not stalled_state_before_close(ev, SHORT).ok

    def test_a_stalled_state_before_the_silence_fails(self):
        """A state from before the last byte is not about this silence."""
        a = attempt(events=[(1, 0.1), (2, 0.3)], ended=0.8)
        ev = evidence([a], [state("stalled", 0.2), *chunks(1, 2, at=0.31)])
        assert not stalled_state_before_close(ev, SHORT).ok


class TestStallCases:
    def test_silence_before_the_first_chunk_abandoned_and_retried_passes(self):
        """SC-STALL-1: abandoned in the window, retried, the answer delivered once."""
        first = attempt(1, headers=0.01, ended=0.01 + T + EVERY / 2)
        second = attempt(2, events=[(1, 0.4), (2, 0.4)], arrived=0.39, ended=0.41, end="completed")
        ev = evidence([first, second], [*chunks(1, 2, at=0.42), done(0.43)])
        assert get_case("SC-STALL-1").check(ev, SHORT).ok

    def test_silence_before_the_first_chunk_not_retried_fails(self):
        """SC-STALL-1: giving up instead of retrying before the commit fails."""
        first = attempt(1, headers=0.01, ended=0.01 + T + EVERY / 2)
        ev = evidence([first], [stalled_error(0.4)])
        assert not get_case("SC-STALL-1").check(ev, SHORT).ok

    def test_silence_after_the_commit_surfaced_passes(self):
        """SC-STALL-3: abandoned in the window, one attempt, the stall surfaced."""
        a = attempt(events=[(1, 0.1), (2, 0.1)], ended=0.1 + T + EVERY / 2)
        ev = evidence([a], [*chunks(1, 2, at=0.11), stalled_error(0.45)])
        assert get_case("SC-STALL-3").check(ev, SHORT).ok

    def test_silence_after_the_commit_restarted_fails(self):
        """SC-STALL-3: starting the request again after a chunk duplicates the answer."""
        a = attempt(1, events=[(1, 0.1), (2, 0.1)], ended=0.1 + T + EVERY / 2)
        b = attempt(2, events=[(1, 0.5), (2, 0.5), (3, 0.5)], arrived=0.49, end="completed")
        ev = evidence([a, b], [*chunks(1, 2, at=0.11), *chunks(1, 2, 3, at=0.51), done(0.6)])
        assert not get_case("SC-STALL-3").check(ev, SHORT).ok

    def test_silence_after_the_commit_reported_as_another_error_fails(self):
        """SC-STALL-3: the consumer must learn that the stream stalled."""
        a = attempt(events=[(1, 0.1), (2, 0.1)], ended=0.1 + T + EVERY / 2)
        error = Delivery("s1", "error", 0.45, error="truncated")
        ev = evidence([a], [*chunks(1, 2, at=0.11), error])
        assert not get_case("SC-STALL-3").check(ev, SHORT).ok

    def test_keepalive_only_under_data_must_be_abandoned(self):
        """SC-STALL-9 under "data": reading through keepalives to the end fails."""
        policy = tuned("SC-STALL-9", PIPELINE)
        beats = [0.1 + 0.15 * k for k in range(1, 8)]
        a = attempt(events=[(1, 0.1), (2, 0.1)], comments=beats, ended=2.0, end="completed")
        ev = evidence([a], [*chunks(1, 2, at=0.11), done(2.0)])
        assert not get_case("SC-STALL-9").check(ev, policy).ok

    def test_keepalive_only_under_data_abandoned_in_the_window_passes(self):
        """SC-STALL-9 under "data": closing one timeout after the last data event passes."""
        policy = tuned("SC-STALL-9", PIPELINE)
        t = policy.stall_timeout
        a = attempt(events=[(1, 0.1), (2, 0.1)], comments=[0.25, 0.4, 0.55], ended=0.1 + t + 0.02)
        ev = evidence([a], [*chunks(1, 2, at=0.11), stalled_error(0.6)])
        assert get_case("SC-STALL-9").check(ev, policy).ok

    def test_first_chunk_timeout_makes_the_pre_chunk_case_not_applicable(self):
        """SC-STALL-1 does not apply when a shorter first-chunk timeout governs."""
        assert get_case("SC-STALL-1").applies(PIPELINE, "get") is not None
        assert get_case("SC-STALL-1").applies(EVENTSOURCE, "get") is None


class TestOffline:
    def test_quiet_between_passes_with_nothing_in_the_window(self):
        """Connections before and after the offline window are fine."""
        ev = evidence([], connections=[connection(1, 0.1, 0.3), connection(2, 0.6)])
        assert quiet_between(ev, 0.2, 0.5).ok

    def test_quiet_between_fails_on_a_connection_while_offline(self):
        """A connection opened while offline fails, naming when."""
        ev = evidence([], connections=[connection(1, 0.1, 0.3), connection(2, 0.35)])
        outcome = quiet_between(ev, 0.2, 0.5)
        assert not outcome.ok
        assert "connection 2" in outcome.details[0]

    def test_quiet_between_fails_on_a_reused_connection(self):
        """A request on a kept-alive connection while offline fails too."""
        ev = evidence([attempt(2, arrived=0.3)])
        assert not quiet_between(ev, 0.2, 0.5).ok

    def test_closed_after_passes_for_a_prompt_client_close(self):
        """The attempt open at offline() was closed by the client at once."""
        a = attempt(arrived=0.0, ended=0.21)
        outcome = closed_after((a,), 0.2, QUIET, REACT)
        assert outcome.ok
        assert not outcome.undecidable

    @pytest.mark.parametrize("noise", [QUIET, UNMEASURED], ids=["quiet", "unmeasured"])
    def test_closed_after_fails_when_left_open(self, noise):
        """An attempt still open, or closed long after, fails."""
        assert failed(closed_after((attempt(ended=None, end=None),), 0.2, noise, REACT))
        assert failed(closed_after((attempt(ended=0.9),), 0.2, noise, REACT))

    def test_closed_after_is_prompt_within_a_quarter_of_the_resolution(self):
        """At once: AT_ONCE of the resolution plus the quiet path floor, not more."""
        prompt = 0.2 + AT_ONCE * REACT + QUIET_END - 0.002
        assert closed_after((attempt(ended=prompt),), 0.2, QUIET, REACT).ok
        late = 0.2 + AT_ONCE * REACT + QUIET_END + 0.002
        assert failed(closed_after((attempt(ended=late),), 0.2, QUIET, REACT))

    def test_closed_after_a_block_is_undecidable(self):
        """A close the client loop held back 300 ms: as late as the flaw, so undecidable."""
        outcome = closed_after((attempt(ended=0.51),), 0.2, blocked(0.205, 0.3), REACT)
        assert outcome.undecidable
        assert not outcome.ok

    def test_closed_after_needs_an_open_stream(self):
        """With nothing open at offline() the premise is missing: fail, saying so."""
        outcome = closed_after((attempt(ended=0.1, end="completed"),), 0.2, QUIET, REACT)
        assert failed(outcome)
        assert "no stream was open" in outcome.observed

    def test_reconnected_within_counts_prompt_requests(self):
        """Requests after the signal count when prompt; a late one fails, saying when."""
        ev = evidence([attempt(1, arrived=1.01), attempt(2, arrived=1.02), attempt(3, arrived=2.3)])
        assert reconnected_within(ev, 1.0, REACT, count=2).ok
        outcome = reconnected_within(ev, 1.0, REACT, count=3)
        assert failed(outcome)
        assert "1.300s" in outcome.observed

    def test_reconnected_within_needs_the_requests(self):
        """Fewer requests than counted fail, whatever the noise."""
        ev = evidence([attempt(1, arrived=1.01)])
        assert failed(reconnected_within(ev, 1.0, REACT, count=2))

    def test_a_reconnect_the_harness_delayed_is_undecidable(self):
        """A reconnect the client loop held back 300 ms after online(): undecidable."""
        ev = evidence([attempt(1, arrived=1.31)], noise=blocked(1.005, 0.3))
        outcome = reconnected_within(ev, 1.0, REACT)
        assert outcome.undecidable
        assert not outcome.ok

    def test_a_reconnect_is_timed_from_when_it_left_the_clients_code(self):
        """CI: the page reconnected at once, and Chromium's network process held the
        request 89 ms (its measured way out): timed from the arrival it was late, from
        when it left the page it was not. Without a measured hop it stays late."""
        ev = evidence([attempt(3, arrived=1.095)])
        assert failed(reconnected_within(ev, 1.0, REACT))
        held = replace(ev, noise=replace(ev.noise, hops={3: (0.089, 0.0)}))
        outcome = reconnected_within(held, 1.0, REACT)
        assert outcome.ok, outcome
        assert "left the client's code 0.006s after it" in outcome.observed

    def test_the_reconnect_resolution_is_the_shortest_backoff(self):
        """Waiting out a first backoff is the flaw: the first cap, at most the reaction's."""
        assert reconnect_resolution(EVENTSOURCE) == min(EVENTSOURCE.backoff.cap(1), REACT)

    def test_offline_case_passes_and_fails_on_marks(self):
        """SC-OFFLINE-1 judges from the kit's marks: a reconnect while offline fails."""
        open_attempt = attempt(2, arrived=0.05, ended=0.101)
        marks = [kit(OFFLINE, 0.1), kit(OFFLINE_SENT, 0.1001), kit(ONLINE, 0.3)]
        good = evidence([open_attempt, attempt(3, arrived=0.31, end="completed")], marks)
        assert get_case("SC-OFFLINE-1").check(good, EVENTSOURCE).ok
        bad = evidence([open_attempt, attempt(3, arrived=0.11, end="completed")], marks)
        assert not get_case("SC-OFFLINE-1").check(bad, EVENTSOURCE).ok

    def test_a_case_without_its_marks_fails_and_says_so(self):
        """Missing marks are reported, never silently passed."""
        outcome = get_case("SC-OFFLINE-3").check(evidence([attempt()]), EVENTSOURCE)
        assert not outcome.ok
        assert "online() signalled" in outcome.observed

    def test_blip_needs_every_stream_back_at_once(self):
        """SC-OFFLINE-7: every stream back at once (2 ms apart: "at once" is a quarter of
        the first cap, 10 ms at test timing, plus the path floor) passes; one stream held
        back by a wrongly opened breaker fails."""
        n = EVENTSOURCE.breaker.threshold
        reconnects = [attempt(n + i, events=[(1, 1.0)], arrived=1.0 + 0.002 * i) for i in range(n)]
        streams = [f"s{i}" for i in range(1, n + 1)]
        delivered = [
            d for s in streams for d in (Delivery(s, "chunk", 1.1, data=TOKENS[0]), done(1.1, s))
        ]
        ev = evidence(reconnects, [kit(ONLINE, 1.0), *delivered])
        assert get_case("SC-OFFLINE-7").check(ev, EVENTSOURCE).ok
        late = [*reconnects[:-1], attempt(2 * n, events=[(1, 2.3)], arrived=2.2)]
        assert failed(get_case("SC-OFFLINE-7").check(evidence(late, ev.deliveries), EVENTSOURCE))

    @staticmethod
    def _blink(back: float, *, tried: bool = True) -> Evidence:
        """CI, the example page: a blink at 40.6 ms; each of the five streams began an
        attempt on hearing online (``tried``), which failed without reaching the server,
        and the breaker, counting them, held every stream until its cooldown."""
        n = EVENTSOURCE.breaker.threshold
        streams = [f"s{i}" for i in range(1, n + 1)]
        rows: list[Delivery] = [kit(ONLINE, 0.0406), kit(ONLINE_BACK, back)]
        for s in streams:
            if tried:
                rows += [state("connecting", 0.0428, s), state("retrying", 0.047, s)]
            rows += [state("breaker_open", 0.053, s), Delivery(s, "chunk", 1.27, data=TOKENS[0])]
            rows.append(done(1.28, s))
        late = [attempt(n + i, events=[(1, 1.27)], arrived=1.26 + 0.002 * i) for i in range(n)]
        return evidence(late, rows)

    def test_a_blink_the_browser_had_not_lifted_is_undecidable(self):
        """The page's network came back 9.4 ms after online(): its attempts began before
        then and failed unsent, so they may have met a network still offline."""
        outcome = get_case("SC-OFFLINE-7").check(self._blink(0.050), EVENTSOURCE)
        assert outcome.undecidable, outcome
        assert "premise not met: s1, s2" in outcome.observed

    def test_failures_after_the_network_was_back_are_the_clients(self):
        """An adapter whose online() takes effect at once (in-process, exec) leaves no
        window: the same failures then fail the case."""
        assert failed(get_case("SC-OFFLINE-7").check(self._blink(0.04061), EVENTSOURCE))

    def test_a_breaker_that_counted_the_offline_cuts_still_fails(self):
        """No attempt after online, the breaker open at once: what the case catches,
        whatever the window."""
        outcome = get_case("SC-OFFLINE-7").check(self._blink(0.050, tried=False), EVENTSOURCE)
        assert failed(outcome)


class TestCancel:
    def test_a_prompt_close_passes(self):
        """The server saw the client leave at once."""
        outcome = closed_by_client_within(attempt(ended=0.3), 0.25, QUIET, REACT)
        assert outcome.ok
        assert not outcome.undecidable

    def test_reading_to_the_end_fails(self):
        """A client that read the whole answer after its consumer stopped fails."""
        outcome = closed_by_client_within(attempt(ended=2.0, end="completed"), 0.25, QUIET, REACT)
        assert failed(outcome)
        assert "read to its end" in outcome.observed

    @pytest.mark.parametrize("noise", [QUIET, UNMEASURED], ids=["quiet", "unmeasured"])
    def test_a_late_close_fails(self, noise):
        """Closing long after the consumer stopped fails, measured or not."""
        assert failed(closed_by_client_within(attempt(ended=1.0), 0.25, noise, REACT))

    def test_a_close_the_harness_delayed_is_undecidable(self):
        """A close the client loop held back 300 ms: undecidable, never FAIL."""
        outcome = closed_by_client_within(attempt(ended=0.56), 0.25, blocked(0.255, 0.3), REACT)
        assert outcome.undecidable
        assert not outcome.ok

    def test_break_case_judges_from_the_last_chunk_read(self):
        """SC-CANCEL-1: measured from the consumer's K-th chunk; a retry fails."""
        a = attempt(events=[(1, 0.1), (2, 0.15), (3, 0.2)], ended=0.16)
        ok = evidence([a], chunks(1, 2, at=0.151))
        assert get_case("SC-CANCEL-1").check(ok, EVENTSOURCE).ok
        retried = evidence([a, attempt(2, arrived=0.3)], chunks(1, 2, at=0.151))
        assert failed(get_case("SC-CANCEL-1").check(retried, EVENTSOURCE))
