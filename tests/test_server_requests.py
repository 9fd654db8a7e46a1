"""Requests over real sockets: POST bodies, rejections, plain responses, step selection."""

from __future__ import annotations

import email.utils
import hashlib
import json
import time

import httpx
import pytest

from fake_servers._script import Respond, Stream

PATH = "/v1/chat"
WAIT = 10.0
MIB = 1024 * 1024


@pytest.fixture
def client(fake_server):
    with httpx.Client(base_url=fake_server.url, timeout=WAIT) as c:
        yield c


def error_of(response: httpx.Response) -> dict:
    assert response.headers["content-type"] == "application/json"
    return response.json()["error"]


# -- POST bodies ------------------------------------------------------------------------


def test_post_json_streams_and_records_the_body(fake_server, client):
    """A JSON object body is accepted; the ledger keeps its size and sha256."""
    fake_server.script(PATH, Stream(events=2), method="POST")
    body = json.dumps({"prompt": "write a haiku", "stream": True}).encode()
    response = client.post(PATH, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.text.endswith("data: [DONE]\n\n")
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert (attempt.method, attempt.body_size) == ("POST", len(body))
    assert attempt.body_sha256 == hashlib.sha256(body).hexdigest()
    assert attempt.header("content-type") == "application/json"


def test_post_multipart_with_a_5_mib_image_is_accepted(fake_server, client):
    """A prompt plus a 5 MiB image passes the per-file limit."""
    fake_server.script(PATH, Stream(events=1), method="POST")
    image = b"\x89PNG" + b"\0" * (5 * MIB - 4)
    response = client.post(
        PATH, data={"prompt": "describe"}, files={"image": ("cat.png", image, "image/png")}
    )
    assert response.status_code == 200
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert attempt.body_size > 5 * MIB
    assert attempt.step == 0


def test_post_multipart_file_over_5_mib_is_413_naming_the_file(fake_server, client):
    """One byte over the per-file limit: 413 with a body naming the file and the limit."""
    fake_server.script(PATH, Stream(events=1), method="POST")
    image = b"\0" * (5 * MIB + 1)
    response = client.post(
        PATH, data={"prompt": "describe"}, files={"image": ("big.png", image, "image/png")}
    )
    assert response.status_code == 413
    error = error_of(response)
    assert (error["file"], error["limit"], error["size"]) == ("big.png", 5 * MIB, 5 * MIB + 1)
    assert "big.png" in error["message"]
    assert str(5 * MIB) in error["message"]
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert (attempt.status, attempt.step) == (413, None)
    assert "big.png" in attempt.note


BAD_BODIES = {
    "malformed-json": ("application/json", b'{"prompt": ', 400),
    "json-not-object": ("application/json", b'["prompt"]', 422),
    "json-bad-utf8": ("application/json; charset=utf-8", b'{"p": "\xff"}', 400),
    "multipart-no-boundary": ("multipart/form-data", b"--x\r\n", 400),
    "multipart-garbage": ("multipart/form-data; boundary=XyZ", b"this is not multipart", 400),
    "multipart-no-prompt": (
        "multipart/form-data; boundary=XyZ",
        b'--XyZ\r\nContent-Disposition: form-data; name="other"\r\n\r\nhi\r\n--XyZ--\r\n',
        422,
    ),
    "text-plain": ("text/plain", b"hello", 415),
    "no-content-type": (None, b"hello", 415),
}


@pytest.mark.parametrize("name", BAD_BODIES)
def test_bad_post_bodies_are_rejected(fake_server, client, name):
    """Malformed or unsupported bodies get 400/415/422 with a JSON error and a ledger note."""
    content_type, body, status = BAD_BODIES[name]
    fake_server.script(PATH, Stream(events=1), method="POST")
    headers = {"content-type": content_type} if content_type else {}
    response = client.post(PATH, content=body, headers=headers)
    assert response.status_code == status
    assert error_of(response)["status"] == status
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert (attempt.status, attempt.step, attempt.end) == (status, None, "completed")
    assert attempt.note == error_of(response)["message"]
    assert attempt.rejected == "body_invalid"


def test_whole_body_over_the_limit_is_413():
    """A body over max_body_bytes is refused with 413 naming the limit."""
    from fake_servers._server import FakeServer

    with FakeServer(max_body_bytes=1000) as server, httpx.Client(timeout=WAIT) as client:
        server.script(PATH, Stream(events=1))
        response = client.post(f"{server.url}{PATH}", json={"prompt": "x" * 2000})
        assert response.status_code == 413
        assert error_of(response)["limit"] == 1000
        (attempt,) = server.ledger.wait_finished(WAIT, PATH)
        assert attempt.body_size > 1000


def test_rejections_do_not_consume_script_steps(fake_server, client):
    """A rejected request is an attempt of its own but the next good one gets the next step."""
    fake_server.script(PATH, Respond(status=500), Stream(events=1), method="POST")
    assert (
        client.post(PATH, content=b"{", headers={"content-type": "application/json"}).status_code
        == 400
    )
    assert client.post(PATH, json={"prompt": "a"}).status_code == 500
    assert (
        client.post(PATH, content=b"x", headers={"content-type": "text/plain"}).status_code == 415
    )
    assert client.post(PATH, json={"prompt": "b"}).status_code == 200
    attempts = fake_server.ledger.wait_finished(WAIT, PATH)
    assert [(a.number, a.step, a.status) for a in attempts] == [
        (1, None, 400),
        (2, 0, 500),
        (3, None, 415),
        (4, 1, 200),
    ]


def test_get_with_a_body_is_fine(fake_server, client):
    """A GET may carry a body; it is recorded and not validated."""
    fake_server.script(PATH, Stream(events=1))
    response = client.request("GET", PATH, content=b"not json at all")
    assert response.status_code == 200
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert attempt.body_size == len(b"not json at all")


# -- routing -------------------------------------------------------------------------------


def test_unknown_path_is_404_listing_the_scripted_paths(fake_server, client):
    """An unscripted path gets a 404 JSON error naming it and the scripted paths."""
    fake_server.script("/b", Stream())
    fake_server.script("/a", Stream())
    response = client.get("/nowhere?x=1")
    assert response.status_code == 404
    error = error_of(response)
    assert (error["path"], error["scripted_paths"]) == ("/nowhere", ["/a", "/b"])
    (attempt,) = fake_server.ledger.wait_finished(WAIT, "/nowhere")
    assert (attempt.status, attempt.step, attempt.query) == (404, None, "x=1")
    assert attempt.rejected == "no_endpoint"


def test_method_mismatch_is_405(fake_server, client):
    """A POST to a GET endpoint gets 405 with an Allow header and uses no step."""
    fake_server.script(PATH, Respond(status=200, body=b"ok"), method="GET")
    response = client.post(PATH, json={})
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"
    assert client.get(PATH).text == "ok"
    attempts = fake_server.ledger.wait_finished(WAIT, PATH)
    assert [(a.status, a.step, a.rejected) for a in attempts] == [
        (405, None, "method"),
        (200, 0, None),
    ]
    assert attempts[0].response_header("allow") == "GET"


# -- plain responses --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503, 504])
def test_error_statuses_with_default_bodies(fake_server, client, status):
    """Any 4xx/5xx with the default JSON error body naming the status."""
    fake_server.script(PATH, Respond(status=status))
    response = client.get(PATH)
    assert response.status_code == status
    assert error_of(response)["status"] == status
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert (attempt.status, attempt.step, attempt.end) == (status, 0, "completed")
    assert attempt.first_byte_at is not None


def test_no_content(fake_server, client):
    """204 goes out with an empty body."""
    fake_server.script(PATH, Respond(status=204))
    response = client.get(PATH)
    assert (response.status_code, response.content) == (204, b"")


def test_scripted_headers_and_body_go_out_as_given(fake_server, client):
    """Retry-After seconds, retry-after-ms and a custom body are passed through unchanged."""
    headers = (("Retry-After", "7"), ("retry-after-ms", "6500"), ("content-type", "text/plain"))
    fake_server.script(PATH, Respond(status=429, headers=headers, body=b"slow down"))
    response = client.get(PATH)
    assert response.status_code == 429
    assert (response.headers["retry-after"], response.headers["retry-after-ms"]) == ("7", "6500")
    assert response.content == b"slow down"
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert attempt.response_header("retry-after") == "7"  # names lower-cased, as sent
    assert (attempt.retry_after, attempt.ending) == (6.5, None)  # retry-after-ms wins


def test_retry_after_as_an_http_date(fake_server, client):
    """retry_after_date: an HTTP date at least that many seconds after the response."""
    fake_server.script(PATH, Respond(status=503, retry_after_date=30))
    before = time.time()
    response = client.get(PATH)
    after = time.time()
    when = email.utils.parsedate_to_datetime(response.headers["retry-after"]).timestamp()
    assert before + 30 <= when <= after + 31
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert attempt.retry_after == 30  # the date is at least this far after sending


def test_respond_delay_slows_the_first_byte(fake_server, client):
    """Respond.delay holds the headers back."""
    fake_server.script(PATH, Respond(status=200, body=b"x", delay=0.2))
    client.get(PATH)
    (attempt,) = fake_server.ledger.wait_finished(WAIT, PATH)
    assert attempt.headers_at is not None
    assert attempt.headers_at - attempt.arrived_at >= 0.2


# -- step selection -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("then", "statuses"),
    [("repeat_last", [500, 429, 200, 200, 200]), ("cycle", [500, 429, 200, 500, 429])],
)
def test_successive_attempts_walk_the_steps(fake_server, client, then, statuses):
    """Attempt n gets step n; past the end, the last repeats or the steps cycle."""
    steps = (Respond(status=500), Respond(status=429), Respond(status=200, body=b"ok"))
    fake_server.script(PATH, *steps, then=then)
    assert [client.get(PATH).status_code for _ in statuses] == statuses
