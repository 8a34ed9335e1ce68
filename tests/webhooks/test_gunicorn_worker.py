"""When the web worker has a whole request to hand to a thread (webhooks/gunicorn_worker.py):
the head and a body framed by Content-Length or chunked encoding (RFC 9112 sections 6 and 7),
never earlier, and never later than gunicorn or the app can answer it without waiting."""

from __future__ import annotations

import pytest

from webhooks import app, gunicorn_worker
from webhooks.gunicorn_worker import MAX_HEAD_BYTES, HeadTooLarge, expects_continue, request_end

HEAD = b"POST /api/messages HTTP/1.1\r\nHost: pam.example\r\n"


def test_a_request_without_a_body_ends_with_its_head() -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: pam.example\r\n\r\n"
    assert request_end(request[:-1]) is None
    assert request_end(request) == len(request)
    assert request_end(request + b"GET /he") == len(request), "a pipelined one waits its turn"


def test_a_body_of_a_given_length_is_waited_for() -> None:
    request = HEAD + b"content-length:  5 \r\n\r\nhello"
    assert [request_end(request[:n]) for n in range(len(request) - 5, len(request))] == [None] * 5
    assert request_end(request) == len(request)


def test_a_chunked_body_is_waited_for_to_its_last_chunk_and_trailers() -> None:
    request = HEAD + b"Transfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\n"
    assert all(request_end(request[:n]) is None for n in range(len(HEAD), len(request) + 1))
    assert request_end(request + b"\r\n") == len(request) + 2
    with_trailer = request + b"Expires: never\r\n\r\n"
    assert request_end(with_trailer[:-1]) is None
    assert request_end(with_trailer) == len(with_trailer)


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: -1\r\n\r\n",
        b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        b"Content-Length: %d\r\n\r\n" % (gunicorn_worker.MAX_BODY_BYTES + 1),
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_framing_gunicorn_or_the_app_refuses_goes_to_a_thread_at_once(framing: bytes) -> None:
    """gunicorn answers a malformed length or chunk with a 400, the app a long body with a
    413: neither waits for more bytes, so none are waited for here."""
    assert request_end(HEAD + framing) is not None


def test_a_chunked_body_longer_than_the_limit_goes_to_a_thread() -> None:
    chunk = b"%x\r\n" % 4096 + b"x" * 4096 + b"\r\n"
    body = chunk * (gunicorn_worker.MAX_BODY_BYTES // 4096 + 1)
    assert request_end(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body) is not None


def test_a_head_that_does_not_end_is_refused() -> None:
    request_end(b"GET /" + b"a" * (MAX_HEAD_BYTES - 5))
    with pytest.raises(HeadTooLarge):
        request_end(b"GET /" + b"a" * MAX_HEAD_BYTES)


def test_bodies_the_app_takes_are_read_before_a_thread_serves_them() -> None:
    assert gunicorn_worker.MAX_BODY_BYTES == app.MAX_BODY_BYTES


def test_a_client_that_waits_for_100_continue_is_told_to_send_its_body() -> None:
    request = HEAD + b"Expect: 100-Continue\r\nContent-Length: 5\r\n\r\n"
    assert request_end(request) is None and expects_continue(request)
    assert not expects_continue(request[:-2]), "not before the head is whole"
    assert not expects_continue(request.replace(b"HTTP/1.1", b"HTTP/1.0"))
    assert not expects_continue(HEAD + b"Content-Length: 5\r\n\r\n")
