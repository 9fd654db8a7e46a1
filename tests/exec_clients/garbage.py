"""Exec client that prints a line that is not a JSON object.

``garbage.py hello``: instead of the hello reply. ``garbage.py stream``: after
the first chunk of a stream.
"""

from __future__ import annotations

import sys

from _proto import answer, commands, emit, say

WHEN = sys.argv[1] if len(sys.argv) > 1 else "hello"

for command in commands():
    if command["cmd"] == "hello" and WHEN == "hello":
        say("garbage: about to print garbage instead of hello")
        print("Hello there! (this is not JSON)", flush=True)
    elif answer(command, "garbage"):
        pass
    elif command["cmd"] == "stream":
        emit(type="chunk", stream=command["stream"], data="first")
        say("garbage: about to print a JSON array")
        print("[1, 2, 3]", flush=True)
    elif command["cmd"] == "shutdown":
        break
