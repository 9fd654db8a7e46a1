"""Exec client that crashes on the kit's first command, leaving a traceback on stderr."""

from __future__ import annotations

from _proto import commands, say

say("crash_at_hello: starting")
for command in commands():
    raise RuntimeError(f"crash_at_hello cannot handle {command['cmd']}")
