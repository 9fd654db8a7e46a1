"""Regression tests of chat_app with the real openai and anthropic SDKs: the network
fails on purpose, and the verdict says what the client did about it."""

from __future__ import annotations

import pytest
from chat_app import IncompleteReply, draft_reply, draft_reply_checked, summarize

from fake_servers import rate_limited, reply, truncate_after


def test_summarize_survives_rate_limiting(llm_server):
    """Rate-limited twice, then an answer: the SDK waits out Retry-After and gets it."""
    llm_server.openai.script(*rate_limited(times=2, retry_after=0.2), reply(chunks=8))

    summary = summarize("The quarterly report, all forty pages of it.")

    assert summary
    assert [a.status for a in llm_server.ledger.attempts()] == [429, 429, 200]
    llm_server.verdict(app_output=summary).assert_ok(strict=True)


def test_draft_reply_accepts_a_truncated_stream(llm_server):
    """The body ends cleanly after 3 chunks, without message_stop: the SDK's stream just
    stops, and draft_reply returns part of a reply as if it were whole."""
    llm_server.anthropic.script(truncate_after(3))

    draft = draft_reply("Can we move Thursday's meeting to Friday?")

    verdict = llm_server.verdict(app_output=draft)
    assert verdict.rules() == ("V-TRUNCATED-ACCEPTED",)
    with pytest.raises(AssertionError, match="Accepted a truncated stream as complete"):
        verdict.assert_ok()


def test_draft_reply_checked_surfaces_the_truncation(llm_server):
    """The fixed version raises instead: the verdict is clean."""
    llm_server.anthropic.script(truncate_after(3))

    with pytest.raises(IncompleteReply) as raised:
        draft_reply_checked("Can we move Thursday's meeting to Friday?")

    llm_server.verdict(error=raised.value).assert_ok(strict=True)
