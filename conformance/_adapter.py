"""The adapter contract: how the kit drives one client, whatever it is written in.

An adapter starts streams, hands over what the client delivers to its consumer
(through a ``StreamSink``), passes on offline/online signals, and closes. The
runner owns timestamps: a sink stamps every delivery on the kit's clock. It lives
next to the runner, which needs no pytest; ``conformance`` and ``pytest_streamcheck``
both re-export it.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, cast, runtime_checkable

from conformance._case import CAPABILITIES, CAPABILITY_ALIASES, Capability, StreamRequest
from conformance._evidence import DeliveryLog, ErrorKind
from conformance.reference import ClientPolicy

if TYPE_CHECKING:  # annotations only: importing the servers here would load hypercorn
    from fake_servers import Ledger

__all__ = [
    "ADAPTER_API",
    "API_VERSIONS",
    "REPORTS",
    "AdapterInfo",
    "AdapterRequest",
    "ClientAdapter",
    "Diagnostics",
    "HostsLibraryClients",
    "LagCollector",
    "NoiseProbe",
    "Reports",
    "ResetLimit",
    "Startable",
    "StreamCancelled",
    "StreamSink",
    "SyncClientAdapter",
    "as_of_api",
    "check_api",
    "check_capabilities",
]


Reports = Literal["events", "json", "text"]
REPORTS: tuple[Reports, ...] = ("events", "json", "text")


@dataclass(frozen=True)
class AdapterInfo:
    """Who the client is and what it can do."""

    name: str
    version: str = "unknown"
    capabilities: frozenset[Capability] = field(default_factory=frozenset)
    # A client that cannot take its policy from the kit names the profile it follows;
    # the suite then runs that profile at its real timing.
    profile: str | None = None
    # The wire format the client speaks on a plain endpoint (an SDK that appends its own
    # path to the base URL gets its provider's anyway): "openai", "responses",
    # "anthropic", "gemini"; None: the run's --streamcheck-format, else "auto".
    wire_format: str | None = None
    # The client does all its waiting on the asyncio loop the kit runs the adapter on
    # (asyncio or anyio sleeps, timeouts and sockets; no threads, no time.sleep), so the
    # kit may run it in virtual time: exact verdicts at the profile's real numbers.
    virtual_time: bool = False
    # What the adapter reports through ``StreamSink.chunk`` (docs/adapters.md, "What to
    # report"): "events", each event's data as the wire had it; "json", each event's
    # parsed object dumped again (an SDK's chunk objects); "text", the answer's text as
    # the application got it, in any pieces (an SDK's text deltas, a framework's
    # callback). A "text" client is judged from its text alone (``conformance._text``).
    reports: Reports = "events"
    # The adapter API the adapter was written against (docs/adapters.md "Versions"):
    # ADAPTER_API for a new adapter. None is read as API 1, with a DeprecationWarning.
    api: int | None = None

    def __post_init__(self) -> None:
        # Any iterable of names is taken (a tuple, a set); kept as a frozenset.
        capabilities = check_capabilities(self.capabilities, "AdapterInfo.capabilities")
        api = check_api(self.api, f"AdapterInfo(name={self.name!r}).api")
        if self.reports not in REPORTS:
            known = ", ".join(REPORTS)
            raise ValueError(f"AdapterInfo.reports: {self.reports!r} is not one of {known}")
        object.__setattr__(self, "capabilities", as_of_api(capabilities, api))
        object.__setattr__(self, "api", api)


ADAPTER_API = 2  # the adapter API this kit speaks; CHANGELOG.md says what each one changed
API_VERSIONS = (1, 2)  # the ones it still runs


def check_api(api: object, where: str) -> int:
    """The adapter API an adapter declares, as a number the kit runs.

    Raises:
        ValueError: ``api`` is not one of ``API_VERSIONS`` (named in the message).
    """
    if api is None:
        warnings.warn(
            f"{where} is not set: the adapter is read as API 1 (a 'post' client also sends "
            f"multipart bodies). Set api={ADAPTER_API} and declare 'multipart' if it does; "
            "a later release will refuse an adapter that names no API (CHANGELOG.md).",
            DeprecationWarning,
            stacklevel=4,
        )
        return 1
    if isinstance(api, bool) or api not in API_VERSIONS:
        known = ", ".join(map(str, API_VERSIONS))
        raise ValueError(f"{where}: adapter API {api!r} is not one this kit runs ({known})")
    return int(api)


def as_of_api(capabilities: frozenset[Capability], api: int) -> frozenset[Capability]:
    """What ``capabilities`` meant under adapter API ``api``, in this kit's names: API 1
    had no "multipart", and every "post" client was sent multipart bodies."""
    if api == 1 and "post" in capabilities:
        return capabilities | {"multipart"}
    return capabilities


def check_capabilities(named: object, where: str) -> frozenset[Capability]:
    """``named`` as a frozenset of capabilities, each one the kit knows.

    An unknown name (a typo, or a newer kit's) would otherwise be dropped silently,
    and the cases that need what it meant end UNSUPPORTED with nothing said.

    Raises:
        ValueError: ``named`` is not a collection of names, or names an unknown one;
            the message starts with ``where``.
    """
    if isinstance(named, str | bytes) or not isinstance(named, Iterable):
        raise ValueError(f"{where}: expected a set of capability names, got {named!r}")
    names: list[object] = []
    for name in named:
        names.extend(CAPABILITY_ALIASES.get(name, (name,)) if isinstance(name, str) else (name,))
    for name in names:
        if name not in CAPABILITIES:
            close = (
                difflib.get_close_matches(name, CAPABILITIES, n=1) if isinstance(name, str) else []
            )
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join(CAPABILITIES)
            raise ValueError(f"{where}: unknown capability {name!r}{hint}; the known ones: {known}")
    return frozenset(cast("list[Capability]", names))


@dataclass(frozen=True)
class AdapterRequest:
    """A stream to open: the case's request and the absolute URL to send it to."""

    url: str
    request: StreamRequest

    @property
    def stream(self) -> str:
        return self.request.stream


class StreamCancelled(Exception):
    """Raised by a sink once the runner has cancelled the stream; let it propagate."""


class StreamSink:
    """Where an adapter reports what its client handed the consumer, for one stream.

    Each method stamps the delivery with the kit's clock as it is called; ``at`` (a
    time on that clock) is for an adapter that knows better when its client handed
    it over, e.g. the browser adapter, which maps the page's own clock onto the kit's.
    """

    def __init__(self, log: DeliveryLog, stream: str) -> None:
        self._log = log
        self._stream = stream
        self._cancelled = False
        self.chunks = 0

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def _guard(self) -> None:
        if self._cancelled:
            raise StreamCancelled(self._stream)

    def chunk(
        self,
        data: str,
        *,
        id: str | None = None,
        event: str | None = None,
        at: float | None = None,
    ) -> None:
        self._guard()
        self.chunks += 1
        self._log.add(self._stream, "chunk", at=at, data=data, id=id or None, event=event)

    def comment(self, text: str, *, at: float | None = None) -> None:
        """A comment line's text (after the colon, one leading space removed)."""
        self._guard()
        self._log.add(self._stream, "comment", at=at, data=text)

    def state(
        self, state: str, *, delay: float | None = None, detail: str = "", at: float | None = None
    ) -> None:
        self._log.add(self._stream, "state", at=at, state=state, delay=delay, detail=detail)

    def error(
        self,
        kind: ErrorKind,
        detail: str = "",
        *,
        status: int | None = None,
        at: float | None = None,
    ) -> None:
        self._log.add(self._stream, "error", at=at, error=kind, detail=detail, status=status)

    def done(self, *, at: float | None = None) -> None:
        self._log.add(self._stream, "done", at=at)

    def log(self, message: str, *, at: float | None = None) -> None:
        self._log.add(self._stream, "log", at=at, data=message)


@runtime_checkable
class ClientAdapter(Protocol):
    """An async adapter. ``stream`` runs until the stream ends; the runner cancels
    its task to model a consumer that stops reading, and the adapter must then
    close the client's stream (for an iterator: leave the loop, which closes it)."""

    info: AdapterInfo

    async def configure(self, policy: ClientPolicy) -> None:
        """Use this policy from now on (only called with the "configurable" capability)."""

    async def reset(self) -> None:
        """Forget breaker state, attempt counts and streams: called before every case."""

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None: ...

    async def offline(self) -> None: ...

    async def online(self) -> None: ...

    async def aclose(self) -> None: ...


# The optional hooks: an adapter that has one is told more, or asked more, by the runner
# (``isinstance(adapter, Hook)``); one that has none is driven by the contract alone.


@runtime_checkable
class Startable(Protocol):
    """An adapter with a start of its own (the exec adapter's handshake, the browser's
    page), awaited on its loop as soon as the factory has made it; if it raises, the
    runner closes the adapter (``aclose``) and the client did not start."""

    async def start(self) -> object: ...


@runtime_checkable
class NoiseProbe(Protocol):
    """An adapter whose client has a loop of its own to probe (a browser page, an exec
    client's process, a sync client's threads): the runner turns the probe on as a case
    starts (the ledger to record its lag into) and off as it ends (None). Called from
    the runner's thread, not the adapter's loop."""

    def measure_lag(self, ledger: Ledger | None) -> None: ...


@runtime_checkable
class LagCollector(Protocol):
    """An adapter whose probe holds rows back (a page's, a process's): the runner awaits
    this as a case ends, before it reads the case's noise, within the case's limit."""

    async def collect_lag(self) -> None: ...


@runtime_checkable
class HostsLibraryClients(Protocol):
    """An adapter that runs a library's client instances on the runner's loop (the async
    SDK adapters): when True, that loop is probed as a hosting loop, ``sdk-loop``, not
    the kit's own ``client`` (docs/timing.md)."""

    hosts_library_clients: bool


@runtime_checkable
class ResetLimit(Protocol):
    """An adapter whose ``reset`` may take longer than the runner's command limit by its
    own limits (the browser's page reopened): the runner waits that long, plus a margin,
    so the adapter's own message is the one a user sees."""

    @property
    def reset_limit(self) -> float:
        """Seconds ``reset`` may take."""
        ...


@runtime_checkable
class Diagnostics(Protocol):
    """An adapter that can tell about its client (the exec adapter: its state and last
    stderr lines); added to a harness error's message, never hiding it."""

    def diagnostics(self) -> str: ...


class SyncClientAdapter:
    """Base for wrapping a synchronous client: implement the ``*_sync`` methods.

    ``stream_sync`` runs in a worker thread. When the runner cancels the stream,
    the next call on the sink raises ``StreamCancelled``, which breaks the
    consumer's loop (close the client's stream in a ``with`` or ``finally``).
    """

    info: AdapterInfo

    def configure_sync(self, policy: ClientPolicy) -> None:
        """Override to take the policy."""

    def reset_sync(self) -> None:
        """Override to reset the client."""

    def stream_sync(self, request: AdapterRequest, sink: StreamSink) -> None:
        raise NotImplementedError

    def offline_sync(self) -> None:
        """Override if the client handles offline."""

    def online_sync(self) -> None:
        """Override if the client handles online."""

    def close_sync(self) -> None:
        """Override to release the client."""

    async def configure(self, policy: ClientPolicy) -> None:
        await asyncio.to_thread(self.configure_sync, policy)

    async def reset(self) -> None:
        await asyncio.to_thread(self.reset_sync)

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        try:
            await asyncio.shield(asyncio.to_thread(self._guarded, request, sink))
        except asyncio.CancelledError:
            sink.cancel()  # the thread notices at its next delivery
            raise

    def _guarded(self, request: AdapterRequest, sink: StreamSink) -> None:
        with contextlib.suppress(StreamCancelled):
            self.stream_sync(request, sink)

    async def offline(self) -> None:
        await asyncio.to_thread(self.offline_sync)

    async def online(self) -> None:
        await asyncio.to_thread(self.online_sync)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close_sync)


AdapterFactory = Callable[[], ClientAdapter]
