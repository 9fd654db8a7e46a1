"""Exec client that delivers one chunk of a stream, then exits with code 3."""

from __future__ import annotations

import sys

from _proto import answer, commands, emit, say

for command in commands():
    if not answer(command, "exit-mid-stream") and command["cmd"] == "stream":
        emit(type="chunk", stream=command["stream"], data="only")
        say("exit_mid_stream: giving up mid-stream")
        sys.exit(3)
