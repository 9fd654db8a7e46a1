"""Exec client that answers ``hello``, then stops reading its stdin and answers nothing
more (until a signal ends it): a client that stops answering."""

from __future__ import annotations

import sys
import time

from _proto import hello, say

sys.stdin.readline()  # the hello
hello("deaf-after-hello")
say("deaf_after_hello: answered hello; reading nothing more")
while True:
    time.sleep(3600)
