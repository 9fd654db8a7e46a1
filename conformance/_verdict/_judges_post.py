"""The non-idempotent request rules: a POST re-sent, a body changed on retry."""

from __future__ import annotations

from collections.abc import Iterator

from conformance._verdict._calls import Inputs
from conformance._verdict._result import Finding, make_finding

__all__ = [
    "SAFE_METHODS",
    "body_changed",
    "resent",
]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def resent(ins: Inputs) -> Iterator[Finding]:
    if ins.idempotent is not False:
        return
    for number, looks in ins.calls:
        if looks[0].a.method in SAFE_METHODS or len(looks) < 2:
            continue
        seen = next((i for i, look in enumerate(looks) if look.body_complete), None)
        if seen is None or seen == len(looks) - 1:
            continue
        first = looks[seen]
        yield make_finding(
            "V-POST-RESENT",
            [look.seq for look in looks[seen:]],
            f"#{first.seq} reached the server ({first.outcome}); the same non-idempotent "
            f"{first.a.method} was sent again {len(looks) - seen - 1} time(s)",
            call=number,
        )


def body_changed(ins: Inputs) -> Iterator[Finding]:
    for number, looks in ins.calls:
        first = looks[0].a
        changed = [
            look
            for look in looks[1:]
            if (look.a.body_sha256, look.a.body_size) != (first.body_sha256, first.body_size)
        ]
        if changed:
            yield make_finding(
                "V-POST-BODY-CHANGED",
                [looks[0].seq, *(look.seq for look in changed)],
                f"retries under Idempotency-Key {first.idempotency_key} sent "
                f"{len(changed)} different bod(ies): "
                + ", ".join(
                    f"#{look.seq} {look.a.body_size} B sha256 {look.a.body_sha256[:12]}"
                    for look in changed
                )
                + f" (first: {first.body_size} B sha256 {first.body_sha256[:12]})",
                call=number,
            )
