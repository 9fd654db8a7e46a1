"""Exec client that delivers one chunk of a stream, then exits with code 3."""

from __future__ import annotations

import sys

from _proto import commands, emit, hello, say

for command in commands():
    if command["cmd"] == "hello":
        hello("exit-mid-stream")
    elif command["cmd"] in ("configure", "reset"):
        emit(type="configured" if command["cmd"] == "configure" else "reset")
    elif command["cmd"] == "stream":
        emit(type="chunk", stream=command["stream"], data="only")
        say("exit_mid_stream: giving up mid-stream")
        sys.exit(3)
