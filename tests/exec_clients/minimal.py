"""A minimal, correct exec client: the kit's reference StreamingClient behind protocol v1.

Commands come in on stdin, one JSON object a line; events go out on stdout. Each
``stream`` command runs as a task; ``cancel`` cancels it, which leaves the
client's ``async with`` block and so closes the connection.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import sys
from typing import Any

from _proto import CAPABILITIES, emit, say

from conformance._profiles import policy_from_dict
from conformance.reference import (
    ClientPolicy,
    SSEComment,
    StateChange,
    StreamError,
    StreamingClient,
)
from pytest_streamcheck.targets._reference import error_kind


class Client:
    """One StreamingClient (rebuilt on configure and reset) and its open streams."""

    def __init__(self) -> None:
        self.policy = ClientPolicy()
        self.client = StreamingClient(self.policy, rng=random.Random(0))
        self.tasks: dict[str, asyncio.Task[None]] = {}

    async def close(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()
        await self.client.aclose()

    async def renew(self) -> None:
        """Forget breaker state and streams: a fresh client on the current policy."""
        await self.close()
        self.client = StreamingClient(self.policy, rng=random.Random(0))

    def start(self, command: dict[str, Any]) -> None:
        sid = command["stream"]
        task = asyncio.get_running_loop().create_task(self.run(sid, command))
        self.tasks[sid] = task
        task.add_done_callback(lambda _: self.tasks.pop(sid, None))

    async def run(self, sid: str, command: dict[str, Any]) -> None:
        def state(change: StateChange) -> None:
            emit(
                type="state",
                stream=sid,
                state=change.state.value,
                delay=change.delay,
                detail=change.detail,
            )

        cancel_after = command.get("cancel_after")
        events = self.client.stream(
            command["url"],
            method=command["method"],
            headers=command.get("headers") or {},
            last_event_id=command.get("last_event_id"),
            idempotent=command.get("idempotent"),
            on_state=state,
            comments=bool(command.get("comments")),
            **body_arguments(command.get("body")),
        )
        items = events.items() if command.get("comments") else events  # comments too?
        # Read with anext() and close once in ``finally``: ``async with`` + ``async for``
        # would close the stream twice at once (the block and the loop's generator), and
        # the reference client then leaves the connection open (reported to the lead).
        try:
            delivered = 0
            while cancel_after is None or delivered < cancel_after:
                try:
                    event = await anext(items)
                except StopAsyncIteration:
                    emit(type="done", stream=sid)
                    return
                if isinstance(event, SSEComment):
                    emit(type="comment", stream=sid, text=event.text)
                    continue
                emit(
                    type="chunk",
                    stream=sid,
                    data=event.data,
                    id=event.id or None,
                    event=event.event,
                )
                delivered += 1
            # The consumer stopped reading: closing the stream hangs up.
        except StreamError as exc:
            kind, status = error_kind(exc)
            emit(type="error", stream=sid, kind=kind, detail=str(exc), status=status)
        finally:
            await events.aclose()


def body_arguments(body: dict[str, Any] | None) -> dict[str, Any]:
    if body is None:
        return {}
    if "json" in body:
        return {"json": body["json"]}
    multipart = body["multipart"]
    files = {
        f["name"]: (f["filename"], base64.b64decode(f["base64"]), f["content_type"])
        for f in multipart.get("files", [])
    }
    return {"data": multipart.get("fields", {}), "files": files}


async def serve(client: Client, lines: asyncio.StreamReader) -> None:
    while line := await lines.readline():
        command = json_object(line)
        name = command.get("cmd")
        if name == "hello":
            emit(
                type="hello",
                protocol=1,
                name="minimal-python",
                version="1.0",
                capabilities=CAPABILITIES,
            )
        elif name == "configure":
            client.policy = policy_from_dict(command["policy"])
            await client.renew()
            emit(type="configured")
        elif name == "reset":
            await client.renew()
            emit(type="reset")
        elif name == "stream":
            client.start(command)
        elif name == "cancel" and command["stream"] in client.tasks:
            client.tasks[command["stream"]].cancel()
        elif name == "offline":
            client.client.offline()
        elif name == "online":
            client.client.online()
        elif name == "shutdown":
            break
    say("minimal: shutting down")
    await client.close()


def json_object(line: bytes) -> dict[str, Any]:
    value = json.loads(line)
    return value if isinstance(value, dict) else {}


async def main() -> None:
    say("minimal: ready")
    loop = asyncio.get_running_loop()
    lines = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(lines), sys.stdin)
    await serve(Client(), lines)


if __name__ == "__main__":
    asyncio.run(main())
