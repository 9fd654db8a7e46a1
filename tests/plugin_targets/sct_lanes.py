"""A reference client that records how the suite's lanes used it, for the lanes tests.

Every adapter the factory makes (one a lane, and one more after a restart) is counted;
each stream start records its name and how many other adapters had a stream open then.
The records live in this module: an in-process pytester run that imports it from the
test module (so the run reuses that import) leaves them for the test to read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from conformance._adapter import AdapterRequest, StreamSink
from pytest_streamcheck.targets._reference import ReferenceAdapter

__all__ = ["RECORD", "Counting", "Record", "make_adapter"]


@dataclass
class Record:
    made: int = 0
    busy: dict[int, int] = field(default_factory=dict)  # adapter -> streams open
    starts: list[tuple[str, int]] = field(default_factory=list)  # (stream, others busy)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self.lock:
            self.made = 0
            self.busy.clear()
            self.starts.clear()

    @property
    def most_at_once(self) -> int:
        return max((others + 1 for _, others in self.starts), default=0)


RECORD = Record()


class Counting(ReferenceAdapter):
    # Lanes are real time's: a client in virtual time plays in one lane (exact, and all
    # CPU), so this one says it cannot, and is played at test timing as before.
    info = replace(ReferenceAdapter.info, virtual_time=False)

    def __init__(self) -> None:
        super().__init__(seed=0)
        with RECORD.lock:
            RECORD.made += 1
            self._number = RECORD.made

    async def stream(self, request: AdapterRequest, sink: StreamSink) -> None:
        with RECORD.lock:
            others = sum(1 for k, n in RECORD.busy.items() if n and k != self._number)
            RECORD.starts.append((request.request.stream, others))
            RECORD.busy[self._number] = RECORD.busy.get(self._number, 0) + 1
        try:
            await super().stream(request, sink)
        finally:
            with RECORD.lock:
                RECORD.busy[self._number] -= 1


def make_adapter() -> Counting:
    return Counting()
