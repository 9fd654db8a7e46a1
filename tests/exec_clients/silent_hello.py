"""Exec client that reads every command and never answers (until stdin closes)."""

from __future__ import annotations

from _proto import commands, say

say("silent_hello: reading commands, answering none")
for command in commands():
    say(f"silent_hello: ignoring {command['cmd']}")
