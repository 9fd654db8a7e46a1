"""The stream rules: restart after commit, stalls, closing on stop, accepted failures."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from conformance._verdict._calls import Inputs, Look, in_band_error
from conformance._verdict._result import Finding, make_finding
from conformance.timing._noise import LAG_FACTOR
from fake_servers._ledger import Stalled

__all__ = [
    "accepted",
    "not_closed",
    "restarted",
    "sat_through",
]


def restarted(ins: Inputs) -> Iterator[Finding]:
    for number, looks in ins.calls:
        for prev, nxt in itertools.pairwise(looks):
            if not prev.committed:
                continue
            ids = prev.ids_sent()
            resumed = bool(ids) and nxt.a.last_event_id is not None
            if resumed:
                continue
            why = (
                "without Last-Event-ID"
                if ids
                else "and the stream carried no ids, so it could only start over"
            )
            observed = (
                f"#{prev.seq} sent {prev.chunks} chunk(s) and failed ({prev.outcome}); "
                f"#{nxt.seq} asked again {why}"
            )
            twice = _duplicated(ins, prev)
            held = 0.0 if twice else _held_back(ins, prev, nxt)
            if held:
                # Beside a second suite a client whose read timed out before the first
                # chunk (the server's loop stalled) asked again, and the server sent the
                # chunks after: it had none to restart.
                yield make_finding(
                    "V-COMMIT-RESTART",
                    (prev.seq, nxt.seq),
                    f"{observed}; the chunks may have left after #{nxt.seq} was asked for: "
                    f"the kit's loops were held up to {held * 1000:.0f} ms meanwhile",
                    call=number,
                    undecided=True,
                )
                continue
            yield make_finding(
                "V-COMMIT-RESTART", (prev.seq, nxt.seq), observed + twice, call=number
            )


def _held_back(ins: Inputs, prev: Look, nxt: Look) -> float:
    """The lag that could have moved ``prev``'s first chunk past ``nxt``'s request (0: none
    could). The server stamps both; a stall of its loops between them can stamp a chunk
    written after the client had given up, and the client then never had it."""
    sent = prev.a.data_events
    if not sent:
        return 0.0
    lag = ins.noise.lag(prev.a.arrived_at, nxt.a.arrived_at)
    margin = nxt.a.arrived_at - sent[0].at
    return lag if margin <= LAG_FACTOR * lag else 0.0


def _sent_text(ins: Inputs, look: Look) -> str:
    if ins.seed is None:
        return ""
    from fake_servers._formats import sent_text  # the answer's words, on first use

    return sent_text(look.a, ins.seed)


def _duplicated(ins: Inputs, prev: Look) -> str:
    if ins.app_output is None:
        return ""
    partial = _sent_text(ins, prev)
    if len(partial.strip()) >= 3 and ins.app_output.count(partial) >= 2:
        return f"; the app's output contains those chunks twice ({partial[:40]!r}...)"
    return ""


def _stall_threshold(ins: Inputs, stall: Stalled) -> tuple[float, str]:
    if ins.stall_timeout is not None:
        return ins.stall_timeout, "the test's stall_timeout"
    p = ins.policy
    name = ins.profile.key if ins.profile is not None else "the seed's"
    if stall.after == 0 and p.first_chunk_timeout:
        return p.first_chunk_timeout, f"{name} time-to-first-chunk timeout"
    return p.stall_timeout + p.stall_check_interval, f"{name} silent-stream timeout + check"


def _stall_silence(look: Look, stall: Stalled, ins: Inputs) -> tuple[float, float]:
    """(start, silence endured) of the scripted stall, which the server began."""
    start = stall.at
    idle_rule = ins.policy.idle_rule
    if stall.keepalive is not None and idle_rule == "bytes":
        return start, stall.keepalive  # every comment is a heartbeat: the gap is the beat
    later = [e.at for e in look.a.events if e.at > start and e.kind in ("data", "terminal")]
    end = min(later) if later else (ins.judged_at if look.a.ended_at is None else look.a.ended_at)
    return start, end - start


def sat_through(ins: Inputs) -> Iterator[Finding]:
    for look in ins.looks:
        stall = look.a.stall
        if stall is None or look.state == "cancelled":
            continue  # no stall began (the ledger says so once it does)
        start, silence = _stall_silence(look, stall, ins)
        limit, what = _stall_threshold(ins, stall)
        closed = look.a.end == "client_closed" and look.a.ended_at is not None
        slack = ins.noise.worst_slack()
        if (
            closed
            and (0.0 if look.a.ended_at is None else look.a.ended_at) - start <= limit + slack
        ):
            continue  # abandoned in time
        if silence <= limit:
            continue  # the silence never outlasted the limit: nothing to abandon
        still = " and is still connected" if look.a.end is None else ""
        said = (
            f"#{look.seq} stayed through {silence:.3f} s of silence after "
            f"{stall.after} chunk(s){still}; {what} is {limit:g} s"
        )
        if silence <= limit + slack:
            # Past the limit, not past the lag the kit measured: a client whose timer
            # load held back would have stayed as long. Undecided, never clean (beside 2
            # CPU burners a client with no stall timer sat through 1.5 s of a 0.5 s limit
            # under a second of measured lag, and was judged clean).
            yield make_finding(
                "V-STALL-SAT-THROUGH",
                (look.seq,),
                f"{said}; a client whose timer fired, held up to {slack * 1000:.0f} ms by the "
                "load the kit measured, would have stayed as long",
                undecided=True,
            )
            continue
        yield make_finding("V-STALL-SAT-THROUGH", (look.seq,), said)


def not_closed(ins: Inputs) -> Iterator[Finding]:
    mark = ins.stopped_reading_at
    if mark is None:
        return
    slack = ins.noise.worst_slack()
    deadline = mark + slack
    for look in ins.looks:
        a = look.a
        if a.arrived_at > mark or (a.ended_at is not None and a.ended_at <= deadline):
            continue  # not in flight when the app stopped, or over in time
        how = (
            "is still open"
            if a.end is None
            else f"ended {a.end} {(mark if a.ended_at is None else a.ended_at) - mark:.3f} s after"
        )
        said = (
            f"the app stopped reading; #{a.seq} {how} (the close was due within "
            f"{slack:g} s), the server sent {look.chunks} chunk(s) in all"
        )
        if a.end is None and ins.judged_at < deadline:
            # Judged before the close was due: too early to tell, never clean (beside a
            # second suite the lag measured while the verdict waited pushed the deadline
            # past the snapshot, and a client that never closes was judged clean).
            early = f"{said}; judged {ins.judged_at - mark:.3f} s after the app stopped"
            yield make_finding("V-CANCEL-NOT-CLOSED", (a.seq,), early, undecided=True)
            continue
        yield make_finding("V-CANCEL-NOT-CLOSED", (a.seq,), said)


def accepted(ins: Inputs) -> Iterator[Finding]:
    if ins.app_output is None or ins.error is not None:
        return  # judged only when the app returned normally and said what it produced
    for number, looks in ins.calls:
        last = looks[-1]
        if last.state != "failed" or not last.committed:
            continue
        truncated = last.a.end == "completed" and not in_band_error(last.a)
        rule = "V-TRUNCATED-ACCEPTED" if truncated else "V-MIDSTREAM-SWALLOWED"
        what = "ended without its terminal event" if truncated else f"failed ({last.outcome})"
        yield make_finding(
            rule,
            (last.seq,),
            f"#{last.seq} {what} after {last.chunks} chunk(s); the app returned normally "
            f"with {len(ins.app_output)} chars of output and raised nothing",
            call=number,
        )
