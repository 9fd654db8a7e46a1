"""Exec client that delivers one chunk of a stream, then freezes: it reads and writes
nothing more and ignores shutdown (only a signal ends it)."""

from __future__ import annotations

import signal
import time

from _proto import answer, commands, emit, say

for command in commands():
    if not answer(command, "hang-mid-stream") and command["cmd"] == "stream":
        emit(type="chunk", stream=command["stream"], data="only")
        say("hang_mid_stream: frozen after one chunk")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            time.sleep(3600)
