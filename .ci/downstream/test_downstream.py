"""A downstream project's own tests: one plain, two on the kit's fixtures."""

import httpx

from fake_servers import respond, stream


def test_ok():
    pass


def test_client_sees_a_503_then_a_stream(fake_server):
    fake_server.script("/v1/stream", respond(503, retry_after=0.1), stream(events=3))
    with httpx.Client() as client:
        assert client.get(fake_server.url + "/v1/stream").status_code == 503
        with client.stream("GET", fake_server.url + "/v1/stream") as r:
            body = r.read().decode()
    assert body.count("data: ") == 4
    assert [a.status for a in fake_server.ledger.attempts()] == [503, 200]


def test_llm_server_fixture_serves_openai_chunks(llm_server):
    from fake_servers import reply

    llm_server.openai.script(reply(chunks=3))
    import os

    url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
    body = {"model": "m", "messages": [], "stream": True}
    with httpx.Client() as client, client.stream("POST", url, json=body) as r:
        text = r.read().decode()
    assert r.status_code == 200
    assert "[DONE]" in text
    llm_server.verdict().assert_ok()
