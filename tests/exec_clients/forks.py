"""Exec client that leaves processes behind: ``forks.py PIDFILE``.

On starting, before it reads a command, it starts a child that sleeps (in the client's
process group), a grandchild under that child that called setsid (a session of its
own), and a second grandchild in its own session whose parent exits at once (so it
is reparented, away from the client's tree). Each appends its pid to PIDFILE and
ignores SIGTERM and stdin's end. Streams end at once with ``done``; on
``shutdown`` the client exits 0 and leaves them all running.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from _proto import answer, commands, emit, say

PIDFILE = Path(sys.argv[1])


def linger() -> None:
    """The life of a left-behind process: note the pid, then sleep through SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with PIDFILE.open("a") as f:
        f.write(f"{os.getpid()}\n")
    while True:
        time.sleep(3600)


def spawn_pair() -> None:
    """A child in the client's group, and under it a grandchild that called setsid."""
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            linger()
        linger()


def spawn_orphan() -> None:
    """A grandchild in its own session whose parent exits: it loses its parent."""
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os.setsid()
            linger()
        os._exit(0)
    os.waitpid(pid, 0)


def wait_for_pids(count: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if PIDFILE.exists() and len(PIDFILE.read_text().split()) >= count:
            return
        time.sleep(0.01)


spawn_pair()
spawn_orphan()
wait_for_pids(3)
say(f"forks: left {PIDFILE.read_text().split()} behind")
for command in commands():
    if answer(command, "forks"):
        continue
    if command["cmd"] == "stream":
        emit(type="done", stream=command["stream"])
    elif command["cmd"] == "shutdown":
        break
