"""Exec client that shakes hands and answers configure/reset, but never answers a
``stream`` command: it sends no request and reports nothing (an adapter that hangs)."""

from __future__ import annotations

from _proto import answer, commands, say

for command in commands():
    if answer(command, "ignores-streams"):
        continue
    if command["cmd"] == "stream":
        say(f"ignores_streams: ignoring stream {command['stream']}")
    elif command["cmd"] == "shutdown":
        break
