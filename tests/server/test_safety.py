"""The API server on a shared machine: keys, Host names, sizes, and bodies that are wrong.

What is checked here happens before the model is asked, so the scripted stand-in answers
what gets through (quickly); the real model's answers are tested in test_server_api.py.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.server.api import ServerConfig
from app.server.local import LocalServer, ServerStartError, check_address
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.trace import TRACE, check_trace
from tests.support.loop import Loop
from tests.support.serving import Served, serve, wait_until

KEY = "s3cret-key"
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


def scripted(loop: Loop, tmp_path: Path, config: ServerConfig) -> Served:
    model = tmp_path / "scripted.gguf"
    model.write_bytes(b"GGUF")
    return serve(loop, scripted_opener(ScriptedBackend()), model, config)


@pytest.fixture
def served(loop: Loop, tmp_path: Path) -> Iterator[Served]:
    served = scripted(loop, tmp_path, ServerConfig(port=0, max_body_bytes=4096))
    try:
        yield served
    finally:
        served.server.stop()


@pytest.fixture
def keyed(loop: Loop, tmp_path: Path) -> Iterator[Served]:
    served = scripted(loop, tmp_path, ServerConfig(port=0, api_key=KEY))
    try:
        yield served
    finally:
        served.server.stop()


def test_a_reply_from_the_stand_in(served: Served) -> None:
    reply = httpx.post(served.url + "/chat/completions", json=CHAT)
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == "Hello, world."


def test_the_api_key_is_required_and_checked(keyed: Served) -> None:
    url = keyed.url + "/chat/completions"
    missing = httpx.post(url, json=CHAT)
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "invalid_api_key"
    wrong = httpx.post(url, json=CHAT, headers={"Authorization": "Bearer s3cret-kez"})
    assert wrong.status_code == 401
    prefix = httpx.post(url, json=CHAT, headers={"Authorization": "Bearer s3cret"})
    assert prefix.status_code == 401
    assert httpx.get(keyed.url + "/models").status_code == 401
    right = httpx.post(url, json=CHAT, headers={"Authorization": f"Bearer {KEY}"})
    assert right.status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8731", "192.168.1.20"])
def test_a_foreign_host_header_is_refused(served: Served, host: str) -> None:
    reply = httpx.get(served.url + "/models", headers={"Host": host})
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "host_not_allowed"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "localhost:1"])
def test_loopback_host_headers_pass(served: Served, host: str) -> None:
    assert httpx.get(served.url + "/models", headers={"Host": host}).status_code == 200


def test_a_foreign_host_is_refused_before_the_key_is_looked_at(keyed: Served) -> None:
    reply = httpx.get(keyed.url + "/models", headers={"Host": "evil.example"})
    assert reply.status_code == 403


def test_a_body_over_the_limit_is_413(served: Served) -> None:
    big = {"messages": [{"role": "user", "content": "x" * 5000}]}
    announced = httpx.post(served.url + "/chat/completions", json=big)
    assert announced.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it is read
        body = json.dumps(big).encode()
        for at in range(0, len(body), 1000):
            yield body[at : at + 1000]

    streamed = httpx.post(served.url + "/chat/completions", content=chunks())
    assert streamed.status_code == 413
    assert streamed.json()["error"]["code"] == "request_too_large"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b'{"messages": "hi"}', "messages"),
        (b'{"messages": []}', "messages"),
        (b'{"max_tokens": 4}', "messages"),
        (b'{"messages": [{"role": "wizard", "content": "x"}]}', "messages[0].role"),
        (b'{"messages": [{"role": "user", "content": 5}]}', "messages[0].content"),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', "temperature"),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": 9}', "temperature"),
        (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', "max_tokens"),
        (b'{"messages": [{"role": "user", "content": "x"}], "top_p": 0}', "top_p"),
        (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "stream"),
        (b'{"messages": [{"role": "user", "content": "x"}], "colour": "red"}', "colour"),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "stop": ["a","b","c","d","e"]}',
            "stop",
        ),
    ],
)
def test_bad_bodies_are_400_naming_the_field(
    served: Served, body: bytes, param: str | None
) -> None:
    reply = httpx.post(
        served.url + "/chat/completions",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    if param is not None:
        assert param in error["message"]


def test_completions_check_their_prompt(served: Served) -> None:
    url = served.url + "/completions"
    assert httpx.post(url, json={"prompt": ""}).json()["error"]["param"] == "prompt"
    assert httpx.post(url, json={"prompt": ["a", "b"]}).json()["error"]["param"] == "prompt"
    assert httpx.post(url, json={"prompt": "a", "echo": True}).json()["error"]["param"] == "echo"
    assert httpx.post(url, json={"prompt": "a"}).status_code == 200


def test_unknown_paths_and_methods_get_error_objects(served: Served) -> None:
    missing = httpx.get(served.url + "/embeddings")
    assert missing.status_code == 404
    assert "error" in missing.json()
    wrong = httpx.get(served.url + "/chat/completions")
    assert wrong.status_code == 405
    assert "error" in wrong.json()


def test_no_cors_headers_unless_origins_are_listed(
    served: Served, loop: Loop, tmp_path: Path
) -> None:
    origin = {"Origin": "http://localhost:3000"}
    assert (
        "access-control-allow-origin"
        not in httpx.get(served.url + "/models", headers=origin).headers
    )
    listed = scripted(loop, tmp_path, ServerConfig(port=0, cors_origins=("http://localhost:3000",)))
    try:
        reply = httpx.get(listed.url + "/models", headers=origin)
        assert reply.headers["access-control-allow-origin"] == "http://localhost:3000"
        other = httpx.get(listed.url + "/models", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
    finally:
        listed.server.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::"])
def test_listening_beyond_loopback_needs_a_key(host: str) -> None:
    with pytest.raises(ServerStartError) as caught:
        check_address(host, None)
    assert "API key" in str(caught.value)
    check_address(host, KEY)
    check_address("127.0.0.1", None)
    check_address("::1", None)


def test_a_taken_port_is_a_sentence(served: Served) -> None:
    other = LocalServer(ServerConfig(port=served.server.port), served.session.host)
    with pytest.raises(ServerStartError) as caught:
        other.start()
    assert str(served.server.port) in str(caught.value)
    assert not other.running


def test_garbage_on_the_socket_does_not_hurt_the_server(served: Served) -> None:
    for garbage in (b"\x00\xff" * 100, b"GET / HTTP/9.9\r\n\r\n", b"POST /v1/chat/completions"):
        with socket.create_connection(("127.0.0.1", served.server.port)) as sock:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(5)
            while sock.recv(4096):
                pass
    assert httpx.post(served.url + "/chat/completions", json=CHAT).status_code == 200


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fields=st.dictionaries(
        st.sampled_from(
            ["messages", "temperature", "top_p", "max_tokens", "stop", "seed", "stream",
             "response_format", "stream_options", "n", "presence_penalty", "prompt"]
        ),
        _json,
    )
)  # fmt: skip
def test_no_body_makes_the_server_fail(served: Served, fields: dict[str, object]) -> None:
    for path in ("/chat/completions", "/completions"):
        reply = httpx.post(served.url + path, content=json.dumps(fields), timeout=10)
        assert reply.status_code in (200, 400), reply.text
        if reply.status_code == 400:
            assert reply.json()["error"]["message"]


def test_a_trace_records_the_requests(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    TRACE.start(path)
    try:
        assert httpx.post(served.url + "/chat/completions", json=CHAT).status_code == 200
        wait_until(lambda: served.requests()[-1].outcome is not None)
    finally:
        TRACE.stop()
    document = json.loads(path.read_text())
    assert check_trace(document) == []
    events = document["traceEvents"]
    names = {e["name"] for e in events}
    assert {"api request", "api request ended"} <= names
    computed = [e for e in events if e["name"] == "compute reply"]
    assert [e["args"]["by"] for e in computed] == ["server"]
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "api-server" in threads
