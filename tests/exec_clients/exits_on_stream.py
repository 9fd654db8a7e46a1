"""Exec client that exits with code 7 on its first stream, before it sends a request.

``exits_on_stream.py PIDFILE``: it first starts a child that inherits its stdout and
outlives it (as a wrapper script's background job would), so the pipe stays open and
no end of stdout tells the kit it exited; the child's pid goes to PIDFILE.
"""

from __future__ import annotations

import subprocess
import sys

from _proto import answer, commands, say

for command in commands():
    if not answer(command, "exits-on-stream") and command["cmd"] == "stream":
        if sys.argv[1:]:
            child = subprocess.Popen(["sleep", "60"])
            with open(sys.argv[1], "a") as pids:
                print(child.pid, file=pids)
        say(f"exits_on_stream: exiting on stream {command['stream']}")
        sys.exit(7)
