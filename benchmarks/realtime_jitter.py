"""The jitter and herd cases, in real time, against a correct client and a fixed delay.

    python benchmarks/realtime_jitter.py --runs 10                  # as the machine is
    python benchmarks/realtime_jitter.py --runs 10 --burners 2      # 2 CPU burners beside
    python benchmarks/realtime_jitter.py --runs 10 --beside "python -m pytest -q tests/test_cli.py"

Plays SC-BACKOFF-9, SC-BACKOFF-10 and SC-BACKOFF-11 ``--runs`` times against each client
and prints the verdicts per case (issue 27):

- ``reference``: the reference client as it ships (a kept-alive connection per client:
  a retry after a 503 comes on it, a reconnect after the cut on a new one). It must
  PASS (or, on a starved machine, be INCONCLUSIVE), never FAIL.
- ``reference-fresh``: the reference client with a fresh connection for every attempt
  (``httpx.Limits(max_keepalive_connections=0)``): every retry's wait includes a new
  connection's set-up, which is path, not the client's delay. It must PASS (or, on a
  starved machine, be INCONCLUSIVE), never FAIL.
- ``fixed-delay``: the zoo's ``fixed_delay`` mutant (every instance waits the middle of
  the first delay range, ``tests/zoo/backoff.py``). It must FAIL, never PASS, however
  the load spreads its measured waits.
- ``fixed-delay-fresh`` (with ``--clients all``): the same mutant on a fresh connection
  for every attempt.

``--dump`` prints, for each case that is not the verdict its client must get, the
observed text and the spread of the new connections' accepts against the arrivals
(the ledger links each attempt to its connection: ``fake_servers._ledger.link_attempts``).
The load (``--burners``, ``--beside``) runs throughout, started once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the zoo

import httpx
from _load import Load, stop_signals

from conformance import run_suite
from conformance._adapter import ClientAdapter
from conformance._result import CaseResult
from conformance.reference._request import _ssl_context
from fake_servers._ledger import link_attempts
from pytest_streamcheck.targets._reference import ReferenceAdapter

CASES = ("SC-BACKOFF-9", "SC-BACKOFF-10", "SC-BACKOFF-11")
PROFILES = {"SC-BACKOFF-9": "seed-eventsource", "SC-BACKOFF-10": "seed-fetch"}


class FreshConnections(ReferenceAdapter):
    """The reference client, each instance on an httpx client that keeps no connection
    alive: every attempt opens a new one."""

    def _own_http(self) -> list[httpx.AsyncClient]:
        if "_fresh_http" not in self.__dict__:  # no __init__ of its own: a mixin for the zoo
            self._fresh_http: list[httpx.AsyncClient] = []
        return self._fresh_http

    def _http(self) -> httpx.AsyncClient:
        http = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=self._policy.connect_timeout),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
            verify=_ssl_context(),  # shared, as the reference's: not 20 ms per client
            trust_env=False,
        )
        self._own_http().append(http)  # the instance does not close a client it was given
        return http

    async def reset(self) -> None:
        await super().reset()
        http, self._fresh_http = self._own_http(), []
        for h in http:
            await h.aclose()


def _fixed_delay() -> type[ReferenceAdapter]:
    from zoo.backoff import fixed_delay

    return fixed_delay


def _fixed_delay_fresh() -> type[ReferenceAdapter]:
    mutant = _fixed_delay()
    return type("fixed_delay_fresh", (FreshConnections, mutant), {})


CLIENTS: dict[str, tuple[Callable[[], type[ReferenceAdapter]], str]] = {
    # name: (the adapter class, the verdict it must get)
    "reference": (lambda: ReferenceAdapter, "PASS"),
    "reference-fresh": (lambda: FreshConnections, "PASS"),
    "fixed-delay": (_fixed_delay, "FAIL"),
    "fixed-delay-fresh": (_fixed_delay_fresh, "FAIL"),
}


def _play(make: type[ReferenceAdapter], seed: int, catalog: bool = False) -> list[CaseResult]:
    factory: Callable[[], ClientAdapter] = make
    if catalog:  # the whole catalog, real time at test timing, as a user's run plays it
        return list(run_suite(factory, seed=seed, timing="test"))
    results: list[CaseResult] = []
    for case in CASES:
        profile = PROFILES.get(case, "seed-eventsource")
        # Real time at test timing, whatever the adapter declares (the reference may
        # run in virtual time, where no load reaches a verdict).
        results.extend(run_suite(factory, profile=profile, select=[case], seed=seed, timing="test"))
    return results


def _detail(result: CaseResult) -> str:
    """What the case expected and observed (or why it has no outcome)."""
    if result.outcome is None:
        return result.reason
    noise = result.evidence.noise.headline() if result.evidence is not None else ""
    return f"expected {result.outcome.expected}; observed {result.outcome.observed}; {noise}"


def _connections(result: CaseResult) -> str:
    """The new connections' accepts against the arrivals, over the retries (as the ledger
    links them), and the harness lag the probes measured."""
    ev = result.evidence
    if ev is None:
        return "no evidence"
    again = sorted((a for a in ev.attempts if a.number >= 2), key=lambda a: a.arrived_at)
    if not again:
        return "no retries"
    links = link_attempts(ev.attempts, ev.connections)
    accepted = {c.seq: c.opened_at for c in ev.connections}
    opened = [
        (accepted[links[a.seq].connection], a.arrived_at)
        for a in again
        if a.seq in links and links[a.seq].first
    ]
    line = (
        f"{len(ev.attempts)} attempts, {len(ev.connections)} connections; {len(again)} "
        f"retries arrive over {(again[-1].arrived_at - again[0].arrived_at) * 1000:.0f} ms, "
        f"{len(opened)} on a new connection"
    )
    if opened:
        accepts = [o for o, _ in opened]
        gaps = [a - o for o, a in opened]
        line += (
            f" (accepted over {(max(accepts) - min(accepts)) * 1000:.0f} ms, arriving "
            f"{statistics.median(gaps) * 1000:.0f} ms after the accept at the median, "
            f"{max(gaps) * 1000:.0f} ms at most)"
        )
    return f"{line}; {ev.noise.headline()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--beside", default="", help="a command looping beside the runs")
    parser.add_argument(
        "--clients",
        default="reference,reference-fresh,fixed-delay",
        help=f"comma-separated, or 'all': {', '.join(CLIENTS)}",
    )
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    parser.add_argument("--dump", action="store_true", help="detail every unexpected verdict")
    parser.add_argument(
        "--catalog",
        action="store_true",
        help="a client that must PASS plays the whole catalog (the others the three cases)",
    )
    args = parser.parse_args()
    names = list(CLIENTS) if args.clients == "all" else args.clients.split(",")
    counts: dict[str, Counter[tuple[str, str]]] = {name: Counter() for name in names}
    with stop_signals():
        load = Load(burners=args.burners, beside=args.beside or None)
        try:
            load.start()
            for run in range(args.runs):
                for name in names:
                    make, wanted = CLIENTS[name]
                    whole = args.catalog and wanted == "PASS"
                    for result in _play(make(), args.seed + run, whole):
                        verdict = result.verdict.value
                        counts[name][(result.case.id, verdict)] += 1
                        if whole and result.case.id not in CASES:
                            if verdict not in ("PASS", "UNSUPPORTED"):
                                print(f"run {run + 1} {name} {result.case.id}: {verdict}")
                                if args.dump:
                                    print(f"    {_detail(result)}", flush=True)
                            continue
                        note = f" x{result.factor:g}" if result.factor != 1 else ""
                        print(f"run {run + 1} {name} {result.case.id}: {verdict}{note}", flush=True)
                        if args.dump and verdict != wanted:
                            print(f"    {_detail(result)}\n    {_connections(result)}", flush=True)
                    load.tick()
        finally:
            load.stop()
    loads = load.sampler.samples
    print(
        f"\n{args.runs} run(s), {args.burners} burner(s)"
        + (f", beside {args.beside!r}" if args.beside else "")
        + (f"; 1-minute load average {min(loads):.1f}-{max(loads):.1f}" if loads else "")
    )
    for name in names:
        wanted = CLIENTS[name][1]
        print(f"{name} (must {wanted}):")
        for case in CASES:
            seen = {v: n for (c, v), n in sorted(counts[name].items()) if c == case}
            print(f"  {case}: " + ", ".join(f"{v} {n}" for v, n in seen.items()))
        rest = Counter()
        for (case, verdict), n in counts[name].items():
            if case not in CASES:
                rest[verdict] += n
        if rest:
            print(
                "  the rest of the catalog: "
                + ", ".join(f"{v} {n}" for v, n in sorted(rest.items()))
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
