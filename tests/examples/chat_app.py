"""An application's own code, left unchanged by its tests: it reads no test settings.

The SDK clients are created inside the functions, so they read the environment the
test set (a client built at import time would keep the real provider's URL).
"""

from __future__ import annotations

import anthropic
import openai


class IncompleteReply(RuntimeError):
    """The model's stream ended before the model said it was done."""


def summarize(text: str) -> str:
    """Stream a summary from OpenAI's Chat Completions API and return it."""
    with openai.OpenAI() as client:
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": f"Summarize: {text}"}],
            stream=True,
        )
        with stream:
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def draft_reply(email: str) -> str:
    """Stream a reply from Anthropic's Messages API and return it."""
    with (
        anthropic.Anthropic() as client,
        client.messages.stream(
            model="claude-sonnet-5-5",
            max_tokens=512,
            messages=[{"role": "user", "content": f"Draft a reply to: {email}"}],
        ) as stream,
    ):
        return "".join(stream.text_stream)


def draft_reply_checked(email: str) -> str:
    """draft_reply, fixed: a stream that never said why it stopped is not a reply."""
    with (
        anthropic.Anthropic() as client,
        client.messages.stream(
            model="claude-sonnet-5-5",
            max_tokens=512,
            messages=[{"role": "user", "content": f"Draft a reply to: {email}"}],
        ) as stream,
    ):
        text = "".join(stream.text_stream)
        if stream.get_final_message().stop_reason is None:  # no message_delta / message_stop
            raise IncompleteReply(f"the stream ended after {len(text)} characters")
        return text
