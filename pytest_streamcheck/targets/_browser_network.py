"""The browser's network hop per attempt, from the page's Resource Timing entries: the
way out (the page's ``fetchStart`` to the request's arrival at the server) and the way in
(the server's end of a response to the browser's ``responseEnd``).

That hop runs in Chromium's network process, in none of the kit's loops and not on the
page's renderer thread, so no timer probe sees it: a few milliseconds alone, up to
190 ms when fifty of a page's clients retry at once (docs/browser.md, "The network
hop"). The hops go into the ledger by attempt (``Ledger.record_hop``) and each wait
the kit measures between two attempts is less their own hops (``conformance.timing``).
Pure: the adapter hands in the page's entries and the ledger's attempts.

A hop is measured only where the pairing is certain: an entry whose request did not overlap
another of the page's requests to the same host, path and query, and exactly one attempt
that arrived within it. The way in needs a response the server completed (not a
redirect, whose entry ends with the last hop; not a stream the client left, whose
``responseEnd`` is the client's own moment).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from fake_servers import Attempt

__all__ = ["Entry", "heads_seen", "network_hops", "parse_entries"]


@dataclass(frozen=True)
class Entry:
    """One Resource Timing entry of the page, in page seconds."""

    url: str
    fetch_start: float
    response_end: float


def parse_entries(flat: object) -> list[Entry]:
    """``[url, fetchStart, responseEnd, ...]`` (page milliseconds) as entries; anything
    malformed is dropped (the page's own code shares the window and could break it)."""
    if not isinstance(flat, list):
        return []
    entries = []
    for i in range(0, len(flat) - 2, 3):
        url, start, end = flat[i : i + 3]
        if isinstance(url, str) and _number(start) and _number(end) and 0 < start <= end:
            entries.append(Entry(url, start / 1000, end / 1000))
    return entries


def network_hops(
    entries: Iterable[Entry], attempts: Sequence[Attempt], offset: float, error: float
) -> list[tuple[int, float, float]]:
    """``(seq, out, back)`` per attempt paired with an entry: seconds from the page's
    ``fetchStart`` to the request's arrival, and from the server's end of the response
    to the page's ``responseEnd`` (0 where not measured). ``offset``: the page's clock
    minus the kit's, known to ``error``; the error is taken off each way, so a hop is
    never overstated (a wait less its hops never understates what the client waited)."""
    entries = list(entries)
    hops = []
    for entry, attempt in _paired(entries, attempts, offset, error):
        start, end = entry.fetch_start - offset, entry.response_end - offset
        out = max(0.0, attempt.arrived_at - (start + error))
        ended = attempt.ended_at
        back = 0.0
        if _served(attempt) and ended is not None:
            back = max(0.0, end - error - ended)
        hops.append((attempt.seq, out, back))
    paired = {seq for seq, _, _ in hops}
    hops += _ways_out_unpaired([a for a in attempts if a.seq not in paired], entries, offset, error)
    return hops


def _ways_out_unpaired(
    attempts: Sequence[Attempt], entries: Sequence[Entry], offset: float, error: float
) -> Iterator[tuple[int, float, float]]:
    """The way out of attempts whose entries overlap on one URL (a blink's five
    reconnects: Chromium's network process held them up to 62 ms in CI while the page
    had sent them at once). Where a run of overlapping entries holds exactly as many
    attempts as entries, each attempt's own entry is among them, and its fetch began no
    later than the latest of theirs that began by its arrival: from there on is a way
    out never overstated. No way in: that needs the pairing."""
    by_key = _attempts_by_key(attempts)
    for key, group in _by_key(entries).items():
        for run in _overlapping(group):
            first, last = run[0].fetch_start - offset, max(e.response_end for e in run) - offset
            inside = [
                a for a in by_key.get(key, ()) if first - error <= a.arrived_at <= last + error
            ]
            if len(run) < 2 or len(inside) != len(run):
                continue
            starts = [e.fetch_start - offset for e in run]
            for a in inside:
                begun = max((t for t in starts if t - error <= a.arrived_at), default=None)
                if begun is not None:
                    yield a.seq, max(0.0, a.arrived_at - (begun + error)), 0.0


def _overlapping(group: list[Entry]) -> Iterator[list[Entry]]:
    """The group's entries in runs whose windows overlap one another, by start."""
    run: list[Entry] = []
    end = float("-inf")
    for entry in sorted(group, key=lambda e: e.fetch_start):
        if run and entry.fetch_start > end:
            yield run
            run = []
        run.append(entry)
        end = max(end, entry.response_end)
    if run:
        yield run


def heads_seen(
    resolutions: Iterable[Entry], attempts: Sequence[Attempt], offset: float, error: float
) -> list[tuple[int, float]]:
    """``(seq, at)`` per attempt paired with a fetch's resolution (an ``Entry`` from its
    call to the moment its response reached the page's code): the kit time by which the
    page's code surely had the response head (the offset's error added, so never
    early). A stream's idle timer starts there at the latest (``conformance.cases.stall``)."""
    return [
        (attempt.seq, entry.response_end - offset + error)
        for entry, attempt in _paired(resolutions, attempts, offset, error)
        if attempt.headers_at is not None
    ]


def _paired(
    entries: Iterable[Entry], attempts: Sequence[Attempt], offset: float, error: float
) -> Iterator[tuple[Entry, Attempt]]:
    """Each entry alone on its URL with exactly one attempt arriving inside it."""
    by_key = _attempts_by_key(attempts)
    for key, group in _by_key(entries).items():
        for entry in _alone(group):
            start, end = entry.fetch_start - offset, entry.response_end - offset
            inside = [
                a for a in by_key.get(key, ()) if start - error <= a.arrived_at <= end + error
            ]
            if len(inside) == 1:
                yield entry, inside[0]


def _attempts_by_key(attempts: Sequence[Attempt]) -> dict[tuple[str, str, str], list[Attempt]]:
    """The attempts by host, path and query: the key ``_by_key`` gives an entry."""
    keyed: dict[tuple[str, str, str], list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        keyed[(attempt.header("host") or "", attempt.path, attempt.query)].append(attempt)
    return keyed


def _by_key(entries: Iterable[Entry]) -> dict[tuple[str, str, str], list[Entry]]:
    keyed: dict[tuple[str, str, str], list[Entry]] = defaultdict(list)
    for entry in entries:
        parts = urlsplit(entry.url)
        keyed[(parts.netloc.lower(), parts.path or "/", parts.query)].append(entry)
    return keyed


def _alone(group: list[Entry]) -> list[Entry]:
    """The entries whose [fetch_start, response_end] overlaps no other's in the group."""
    ordered = sorted(group, key=lambda e: e.fetch_start)
    alone, latest_end = [], float("-inf")
    for i, entry in enumerate(ordered):
        after = ordered[i + 1].fetch_start if i + 1 < len(ordered) else float("inf")
        if latest_end < entry.fetch_start and entry.response_end < after:
            alone.append(entry)
        latest_end = max(latest_end, entry.response_end)
    return alone


def _served(attempt: Attempt) -> bool:
    status = attempt.status
    return (
        attempt.end == "completed"
        and attempt.ended_at is not None
        and status is not None
        and not 300 <= status < 400
    )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
