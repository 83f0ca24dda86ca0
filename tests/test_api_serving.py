"""The local API server as the window drives it: on, off, moved, refused, a request stopped."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.engine.scripted import ScriptedBackend, scripted_opener
from app.flow.serving import ApiServing
from app.flow.session import ChatSession, ModelState
from app.serve import api_starter
from app.store.preferences import ApiServerPreferences, Preferences, load_preferences
from app.store.preferences import save_preferences as save
from tests.conftest import Loop, run_until
from tests.serving import wait_until


def session_with_model(loop: Loop, tmp_path: Path, backend: ScriptedBackend) -> ChatSession:
    model = tmp_path / "scripted.gguf"
    model.write_bytes(b"GGUF")
    session = ChatSession(scripted_opener(backend))
    session.open_model(model)
    run_until(loop, lambda: session.state is ModelState.READY)
    return session


def serving_for(session: ChatSession) -> ApiServing:
    return ApiServing(
        api_starter(session.host, lambda: session.settings, lambda: session.queue_bound)
    )


def test_off_by_default_then_on_then_off(loop: Loop, tmp_path: Path) -> None:
    session = session_with_model(loop, tmp_path, ScriptedBackend())
    serving = serving_for(session)
    changes: list[None] = []
    serving.changed.connect(lambda: changes.append(None))
    assert not Preferences().api_server.enabled
    loop.run_until_complete(serving.apply(Preferences().api_server, None))
    assert serving.address is None
    assert serving.status() == ""
    loop.run_until_complete(serving.apply(ApiServerPreferences(enabled=True, port=0), None))
    address = serving.address
    assert address is not None
    assert address.startswith("http://127.0.0.1:")
    assert "0 running, 0 queued" in serving.status()
    reply = httpx.post(
        address + "/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}]}
    )
    assert reply.json()["choices"][0]["message"]["content"] == "Hello, world."
    wait_until(lambda: serving.board.recent()[0].outcome == "done")
    loop.run_until_complete(serving.apply(ApiServerPreferences(enabled=False), None))
    assert serving.address is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(address + "/models")
    assert changes


def test_beyond_loopback_without_a_key_is_a_problem_not_a_crash(loop: Loop, tmp_path: Path) -> None:
    session = session_with_model(loop, tmp_path, ScriptedBackend())
    serving = serving_for(session)
    loop.run_until_complete(
        serving.apply(ApiServerPreferences(enabled=True, host="0.0.0.0", port=0), None)
    )
    assert serving.address is None
    assert "API key" in serving.problem()


def test_the_window_stops_a_request(loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend([f"{i} " for i in range(2000)], rate=200)
    session = session_with_model(loop, tmp_path, backend)
    serving = serving_for(session)
    loop.run_until_complete(serving.apply(ApiServerPreferences(enabled=True, port=0), None))
    address = serving.address
    assert address is not None
    chunks: list[str] = []
    body = {"messages": [{"role": "user", "content": "Count"}], "stream": True, "max_tokens": 5000}
    with httpx.stream("POST", address + "/chat/completions", json=body, timeout=30) as reply:
        for line in reply.iter_lines():
            chunks.append(line)
            if len(chunks) == 10:
                request = serving.board.recent()[-1]
                assert "1 running" in serving.status()
                assert serving.stop_request(request.id)
    wait_until(lambda: request.outcome is not None)
    assert request.outcome == "stopped"
    assert '"finish_reason": "cancelled"' in "\n".join(chunks)
    assert chunks[-2] == "data: [DONE]"
    loop.run_until_complete(serving.close())


def test_the_server_preferences_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "preferences.json"
    chosen = ApiServerPreferences(
        enabled=True, host="::1", port=9999, cors_origins="http://a.test\n\nhttp://b.test"
    )
    save(Preferences(api_server=chosen), path)
    kept = load_preferences(path).api_server
    assert kept == chosen
    assert kept.origins() == ("http://a.test", "http://b.test")
    path.write_text('{"api_server": {"enabled": "yes", "port": 70000, "host": 5}}')
    assert load_preferences(path).api_server == ApiServerPreferences()
