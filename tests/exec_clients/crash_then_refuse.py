"""Exec client that crashes on its first stream and then cannot be started again.

``crash_then_refuse.py MARKER``: the first start creates the file MARKER, answers the
handshake and exits with code 3 on its first ``stream``; every later start finds
MARKER and exits with code 1 before reading anything (as a client whose port or lock
is still held would). ``crash_then_refuse.py MARKER silent``: a later start reads
its commands instead and answers none, until stdin closes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _proto import answer, commands, say

MARKER = Path(sys.argv[1])

if MARKER.exists():
    say("crash_then_refuse: already ran once; refusing to start again")
    if sys.argv[2:] == ["silent"]:
        for _ in commands():
            pass
    sys.exit(1)
MARKER.touch()
for command in commands():
    if not answer(command, "crash-then-refuse") and command["cmd"] == "stream":
        say("crash_then_refuse: crashing on the first stream")
        sys.exit(3)
