"""Cases: self-describing, registered conformance requirements.

A case is data plus two functions: ``play`` drives the fake server, the fault
proxy and the client (through a ``CaseContext``), and ``check`` is a pure
function of the evidence and the policy that says whether the requirement held.
Keeping ``check`` pure lets the kit's own tests judge hand-built records.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Protocol

from conformance._evidence import DeliveryLog, Evidence
from conformance.reference._config import ClientPolicy

if TYPE_CHECKING:  # annotations only: importing the servers here would load hypercorn
    from fake_servers import FakeServer, FaultProxy, Ledger

__all__ = [
    "CAPABILITIES",
    "CAPABILITY_ALIASES",
    "REQUEST_FIELDS_SINCE",
    "Capability",
    "Case",
    "CaseContext",
    "Check",
    "Figure",
    "FigureSample",
    "JsonBody",
    "Level",
    "MultipartBody",
    "Outcome",
    "Play",
    "RequestUnsupported",
    "SetupFailed",
    "StreamRequest",
    "Verdict",
    "all_cases",
    "catalog_key",
    "get_case",
    "newer_fields",
    "register",
]

Capability = Literal[
    "get",
    "post",
    "multipart",
    "breaker",
    "stall",
    "offline",
    "resume",
    "configurable",
    "comments",
    "raw_data",
    "event_fields",
]
CAPABILITIES: tuple[Capability, ...] = (
    "get",
    "post",
    # sends a multipart/form-data body its caller gives (``MultipartBody``); most SDKs
    # send JSON only, and a case they cannot play is UNSUPPORTED, not a flaw
    "multipart",
    "breaker",
    "stall",
    "offline",
    "resume",
    "configurable",
    "comments",  # hands comment lines to a consumer that asks (StreamRequest.comments)
    # hands each event's data as it came on the wire, whatever it holds (an SSE parser
    # or EventSource does; an SDK hands parsed objects of its provider's shape, and
    # cannot carry the parser cases' hand-written events)
    "raw_data",
    # reports each event's type and id as the wire set them (``StreamSink.chunk``'s
    # ``event`` and ``id``); a client that hands over data alone does not
    "event_fields",
)
# Names an adapter may still declare, each standing for the capabilities it became:
# "raw_events" was split in API 2 (docs/adapters.md, CHANGELOG.md).
CAPABILITY_ALIASES: dict[str, tuple[Capability, ...]] = {
    "raw_events": ("raw_data", "event_fields"),
}


class Level(Enum):
    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


class Verdict(Enum):
    PASS = "PASS"
    FAIL = "FAIL"  # a MUST requirement was not met
    NON_STRICT = "NON-STRICT"  # a SHOULD (or MAY) was not met; still conformant
    UNSUPPORTED = "UNSUPPORTED"  # the client lacks a capability, or the profile excludes the case
    ERROR = "ERROR"  # the harness or the adapter broke; never counted against the client
    # The harness's own measured noise left the case unable to tell a correct client
    # from a broken one, even re-judged at a coarser scale: neither PASS nor FAIL.
    INCONCLUSIVE = "INCONCLUSIVE"


class SetupFailed(Exception):
    """A case's play could not set up what it judges (e.g. the herd never formed):
    the case is ERROR with this message, never FAIL."""


@dataclass(frozen=True)
class FigureSample:
    """One judged wait: as measured, the interval its true value lies in, and its band."""

    label: str
    measured: float
    least: float
    most: float
    low: float
    high: float

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "value": round(self.measured, 6),
            "least": round(self.least, 6),
            "most": round(self.most, 6),
            "band": [round(self.low, 6), round(self.high, 6)],
            "ok": self.least <= self.high and self.most >= self.low,
        }


@dataclass(frozen=True)
class Figure:
    """What a timing check judged, for the HTML report: each sample against its band."""

    kind: Literal["delays"]
    label: str
    samples: tuple[FigureSample, ...]

    def to_json(self) -> dict[str, Any]:
        bands = {(s.low, s.high) for s in self.samples}
        band = [min(b[0] for b in bands), max(b[1] for b in bands)] if bands else [0.0, 0.0]
        slack = max((s.measured - s.least for s in self.samples), default=0.0)
        return {
            "kind": self.kind,
            "label": self.label,
            "unit": "s",
            "band": [round(band[0], 6), round(band[1], 6)],
            "slack": round(max(slack, 0.0), 6),
            "samples": [s.to_json() for s in self.samples],
        }


@dataclass(frozen=True)
class Outcome:
    """What a check concluded: whether the requirement held, expected against observed.

    ``undecidable`` (with ``ok`` False) says the measured harness noise left the check
    unable to decide; the runner re-judges such a case at a coarser scale. ``sure``
    (with ``ok`` False) marks a failure no slowness of the kit can explain, e.g. a
    request that must never have been sent: a starved machine does not excuse it.
    """

    ok: bool
    expected: str
    observed: str
    details: tuple[str, ...] = ()
    figure: Figure | None = None
    undecidable: bool = False
    sure: bool = False

    @classmethod
    def passed(cls, expected: str, observed: str = "as expected") -> Outcome:
        return cls(True, expected, observed)

    @classmethod
    def failed(
        cls,
        expected: str,
        observed: str,
        *details: str,
        figure: Figure | None = None,
        sure: bool = False,
    ) -> Outcome:
        return cls(False, expected, observed, details, figure, sure=sure)

    @classmethod
    def unsure(
        cls, expected: str, observed: str, *details: str, figure: Figure | None = None
    ) -> Outcome:
        return cls(False, expected, observed, details, figure, undecidable=True)


@dataclass(frozen=True)
class JsonBody:
    value: Any


@dataclass(frozen=True)
class MultipartBody:
    fields: tuple[tuple[str, str], ...]
    files: tuple[tuple[str, str, str, bytes], ...] = ()  # (field, filename, content type, bytes)


@dataclass(frozen=True)
class StreamRequest:
    """One stream the client is asked to open, through the fault proxy."""

    path: str
    method: Literal["GET", "POST"] = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: JsonBody | MultipartBody | None = None
    idempotent: bool = True
    cancel_after: int | None = None  # the consumer stops reading after this many chunks
    stream: str = "s1"
    # Streams with different ``client`` keys go through independent client instances
    # (own breaker, own randomness): many users, e.g. the thundering herd.
    client: str = "default"
    # The Last-Event-ID the caller sets for the first connection (resuming a stream
    # it read earlier); None: the first request carries no Last-Event-ID.
    last_event_id: str | None = None
    # The consumer asks for comment lines too (keepalive-aware tools); adapters with
    # the "comments" capability then report each one through ``StreamSink.comment``.
    comments: bool = False


# The adapter API that added each StreamRequest field. A case whose request sets a field
# (to anything but its default) newer than the adapter's API is UNSUPPORTED, naming the
# field: that adapter would ignore it, and be judged on a request it never made.
REQUEST_FIELDS_SINCE: dict[str, int] = {
    "path": 1,
    "method": 1,
    "headers": 1,
    "body": 1,
    "idempotent": 1,
    "cancel_after": 1,
    "stream": 1,
    "client": 1,
    "last_event_id": 1,
    "comments": 1,
}


class RequestUnsupported(Exception):
    """A case's request sets a field newer than the adapter's API (``newer_fields``)."""


def newer_fields(request: StreamRequest, api: int) -> list[str]:
    """The fields ``request`` sets that adapter API ``api`` did not have."""
    plain = StreamRequest(request.path)
    return [
        name
        for name, since in REQUEST_FIELDS_SINCE.items()
        if since > api and getattr(request, name) != getattr(plain, name)
    ]


class CaseContext(Protocol):
    """What a case's ``play`` may use; the runner provides it."""

    policy: ClientPolicy  # the policy at the timing this run uses
    transport: Literal["get", "post"]
    server: FakeServer
    proxy: FaultProxy
    ledger: Ledger
    deliveries: DeliveryLog

    def start(self, request: StreamRequest) -> None:
        """Ask the client to open a stream; returns at once."""

    async def wait_ended(self, stream: str, timeout: float) -> bool:
        """Wait until the stream delivered ``done`` or an error; False on timeout."""

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds (polled on ledger and delivery changes)."""

    async def hold(self, seconds: float) -> None:
        """Let scenario time pass (e.g. stay offline); never used to wait for a result."""

    async def cancel(self, stream: str) -> None: ...

    async def offline(self) -> None: ...

    async def online(self) -> None: ...


Play = Callable[[CaseContext], Awaitable[None]]
Check = Callable[[Evidence, ClientPolicy], Outcome]


def _always(policy: ClientPolicy, transport: str) -> str | None:
    return None


@dataclass(frozen=True)
class Case:
    """One requirement of the spec, with the script that exercises it and its check."""

    id: str  # SC-AREA-N, stable forever
    title: str
    level: Level
    requirement: str  # the sentence, with MUST/SHOULD
    source: str  # where it comes from: a seed and section, or a spec
    play: Play
    check: Check
    transport: Literal["get", "post"] = "get"
    needs: frozenset[Capability] = field(default_factory=frozenset)
    # None when the case applies to the policy; otherwise why it does not
    applies: Callable[[ClientPolicy, str], str | None] = _always
    # A variant of the profile's policy this case runs with, keeping the relations
    # it checks (e.g. no breaker while measuring backoff growth). A client that
    # cannot be configured cannot run such a case: UNSUPPORTED.
    tune: Callable[[ClientPolicy], ClientPolicy] | None = None
    # True when the check holds for the untuned policy too (it reads its bounds from
    # the policy): a client that cannot be configured then runs the profile as is.
    tune_optional: bool = False
    # The check judges many clients' waits measured together (the jitter spread, the
    # herd): the runner keeps the kit's own garbage collector from pausing every
    # thread while the case plays.
    quiet_gc: bool = False
    # The check times what the client does on several streams at once (the fifth of
    # five reconnects after a blink): the harness's share of that grows with the work
    # of every stream before it, more than the lag probes see near the stamps, and
    # cases playing beside it (lanes) would add theirs. It plays alone (``exclusive``).
    alone: bool = False

    @property
    def area(self) -> str:
        return self.id.split("-")[1]

    @property
    def exclusive(self) -> bool:
        """Plays with no other case at once when the runner plays cases side by side
        (lanes, docs/timing.md "Cases side by side"): a check over many clients' waits
        measured together (``quiet_gc``: the jitter spread, the herd), or one that times
        several streams at once (``alone``). Every other check judges intervals that
        widen with the lag its own loops measured, other lanes' load included."""
        return self.alone or self.quiet_gc

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "title": self.title,
            "level": self.level.value,
            "requirement": self.requirement,
            "source": self.source,
            "transport": self.transport,
            "needs": sorted(self.needs),
        }


_ID = re.compile(r"^SC-[A-Z]+-\d+$")
_REGISTRY: dict[str, Case] = {}


def register(case: Case) -> Case:
    """Add a case to the catalog; ids are unique and never reused."""
    if not _ID.match(case.id):
        raise ValueError(f"case id {case.id!r} does not match SC-AREA-N")
    if case.id in _REGISTRY:
        raise ValueError(f"duplicate case id {case.id}")
    if not case.requirement or not case.source:
        raise ValueError(f"case {case.id} needs a requirement and a source")
    _REGISTRY[case.id] = case
    return case


def all_cases() -> tuple[Case, ...]:
    """Every registered case, in catalog order (area, then number)."""
    _load_catalog()
    return tuple(sorted(_REGISTRY.values(), key=_order))


def catalog_slot(case_id: str) -> int | None:
    """A case's own slot in catalog order, from its id alone (area, then number; gaps
    allowed): the same in every process, whatever else is registered there. None for
    an id not of the catalog's form."""
    try:
        rank, _, number = catalog_key(case_id)
    except ValueError:
        return None
    return rank * SLOTS_PER_AREA + number if 0 <= number < SLOTS_PER_AREA else None


SLOTS_PER_AREA = 1000  # far beyond an area's cases


def get_case(case_id: str) -> Case:
    _load_catalog()
    return _REGISTRY[case_id]


def _order(case: Case) -> tuple[int, str, int]:
    return catalog_key(case.id)


def catalog_key(case_id: str) -> tuple[int, str, int]:
    """Sort key for case ids in catalog order: area, then number (not as text)."""
    _, area, number = case_id.split("-")
    areas = list(_AREA_ORDER)
    rank = areas.index(area) if area in areas else len(areas)
    return rank, area, int(number)


_AREA_ORDER = (
    "RETRY",
    "COMMIT",
    "BACKOFF",
    "BREAKER",
    "STALL",
    "OFFLINE",
    "CANCEL",
    "POST",
    "SSE",
)


def _load_catalog() -> None:
    # Importing the area modules registers their cases.
    from conformance import cases  # noqa: F401


def iter_areas() -> Iterator[str]:
    seen: list[str] = []
    for case in all_cases():
        if case.area not in seen:
            seen.append(case.area)
            yield case.area
