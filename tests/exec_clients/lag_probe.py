"""Exec client that says it probes its loop and reports one known late wake-up.

With ``--no-probe`` its hello leaves ``lag_probe`` out. Each ``lag`` command it gets is
noted on stderr (the test reads which ones came); a flush answers with one row: a
wake-up due 0.3 s ago that came 0.2 s late, on the wall clock.
"""

from __future__ import annotations

import sys
import time

from _proto import CAPABILITIES, answer, commands, emit, say

PROBES = "--no-probe" not in sys.argv
for command in commands():
    if command["cmd"] == "hello":
        extra = {"lag_probe": True} if PROBES else {}
        emit(
            type="hello",
            protocol=1,
            name="lag-probe",
            version="0",
            capabilities=CAPABILITIES,
            **extra,
        )
    elif answer(command, "lag-probe"):
        continue
    elif command["cmd"] == "lag":
        say(f"lag_probe: lag on={command.get('on')} flush={command.get('flush')}")
        if command.get("flush"):
            t = time.time()
            emit(type="lag", rows=[t - 0.3, t - 0.1], flushed=True)
    elif command["cmd"] == "shutdown":
        break
