"""Exec client that prints a line that is not a JSON object.

``garbage.py hello``: instead of the hello reply. ``garbage.py stream``: after
the first chunk of a stream.
"""

from __future__ import annotations

import sys

from _proto import commands, emit, hello, say

WHEN = sys.argv[1] if len(sys.argv) > 1 else "hello"

for command in commands():
    if command["cmd"] == "hello":
        if WHEN == "hello":
            say("garbage: about to print garbage instead of hello")
            print("Hello there! (this is not JSON)", flush=True)
        else:
            hello("garbage")
    elif command["cmd"] in ("configure", "reset"):
        emit(type="configured" if command["cmd"] == "configure" else "reset")
    elif command["cmd"] == "stream":
        emit(type="chunk", stream=command["stream"], data="first")
        say("garbage: about to print a JSON array")
        print("[1, 2, 3]", flush=True)
    elif command["cmd"] == "shutdown":
        break
