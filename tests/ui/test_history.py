"""Conversations kept in a real SQLite file while the real session streams (scripted backend)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine import GenerationSettings
from app.flow.archive import Archive
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.conversation import Conversation
from app.store.exchange import to_json
from app.ui.chat.rows.text import HeaderRow
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_for, run_until

Opened = tuple[ChatSession, ScriptedBackend, Archive, Path]


def open_session(loop: Loop, path: Path, backend: ScriptedBackend, **kw: object) -> ChatSession:
    archive, problem = loop.run_until_complete(Archive.open(path))
    assert problem is None
    session = ChatSession(scripted_opener(backend), archive=archive, **kw)  # type: ignore[arg-type]
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    return session


@pytest.fixture
def opened(loop: Loop, tmp_path: Path) -> Iterator[Opened]:
    backend = ScriptedBackend([f"word{i} " for i in range(60)], rate=20)
    path = tmp_path / "history.sqlite3"
    session = open_session(loop, path, backend)
    assert session.archive is not None
    yield session, backend, session.archive, path
    loop.run_until_complete(session.close())
    loop.run_until_complete(session.archive.close())


def saved(path: Path) -> list[tuple[str, str, str]]:
    """(role, status, content) of every message in the file, read by another connection."""
    with sqlite3.connect(path) as db:
        return list(db.execute("SELECT role, status, content FROM messages ORDER BY created_at"))


def finish(loop: Loop, session: ChatSession) -> None:
    run_until(loop, lambda: not session.generating, timeout=20)
    assert session.archive is not None
    loop.run_until_complete(session.archive.flush())


def test_a_reply_is_saved_while_it_streams_and_when_it_ends(loop: Loop, opened: Opened) -> None:
    session, _, _, path = opened
    session.send("Tell me something")
    seen: set[int] = set()
    while session.generating:
        run_for(loop, 0.1)
        replies = [content for role, _, content in saved(path) if role == "assistant"]
        if replies and session.generating:
            seen.add(len(replies[0]))
    finish(loop, session)
    # Three seconds of streaming, saved about once a second: several partial saves were seen.
    assert len([n for n in seen if n > 0]) >= 2, seen
    assert saved(path) == [
        ("user", "complete", "Tell me something"),
        ("assistant", "complete", "".join(f"word{i} " for i in range(60))),
    ]


def test_a_stopped_reply_is_saved_as_partial(loop: Loop, opened: Opened) -> None:
    session, _, _, path = opened
    session.send("Go")
    run_until(loop, lambda: session.metrics.reply.pieces_shown >= 5)
    session.stop()
    finish(loop, session)
    (_, (role, status, content)) = saved(path)
    assert (role, status) == ("assistant", "stopped")
    assert content == session.conversation.messages[-1].content
    assert 0 < len(content) < len("".join(f"word{i} " for i in range(60)))


def test_switching_conversations_mid_answer_stops_and_saves(loop: Loop, opened: Opened) -> None:
    session, _, _, path = opened
    session.send("First chat")
    first = session.conversation.id
    run_until(loop, lambda: session.metrics.reply.pieces_shown >= 3)
    loop.run_until_complete(session.new_conversation())
    assert not session.generating
    assert session.conversation.messages == []
    loop.run_until_complete(session.archive.flush())  # type: ignore[union-attr]
    assert [s for _, s, _ in saved(path)] == ["complete", "stopped"]
    assert loop.run_until_complete(session.open_conversation(first))
    assert session.conversation.messages[0].content == "First chat"
    assert session.conversation.messages[-1].status == "stopped"


def test_a_reply_cut_off_by_a_crash_comes_back_marked_interrupted(
    loop: Loop, opened: Opened
) -> None:
    session, _, archive, _ = opened
    crashed = Conversation()
    crashed.add("user", "Before the crash")
    crashed.add("assistant", "half an ans", status="streaming")
    loop.run_until_complete(archive.call(archive.database.save_all, crashed))
    assert loop.run_until_complete(session.open_conversation(crashed.id))
    reply = session.conversation.messages[-1]
    assert (reply.status, reply.content) == ("stopped", "half an ans")
    assert "Interrupted" in reply.note


def test_regenerate_and_edit_keep_every_branch(loop: Loop, opened: Opened) -> None:
    session, backend, archive, path = opened
    backend.rate = 0  # as fast as it goes
    backend.enqueue(["first answer"])
    session.send("Question one")
    finish(loop, session)
    backend.enqueue(["second answer"])
    assert session.regenerate()
    finish(loop, session)
    reply = session.conversation.messages[-1]
    assert reply.content == "second answer"
    variants = session.conversation.variants(reply)
    assert [v.content for v in variants] == ["first answer", "second answer"]
    # The regenerated reply was asked with the same history as the first.
    assert backend.received[-1] == backend.received[-2]

    backend.enqueue(["answer to the edit"])
    assert session.edit_and_resend(session.conversation.messages[0], "Question one, edited")
    finish(loop, session)
    assert [m.content for m in session.conversation.messages] == [
        "Question one, edited",
        "answer to the edit",
    ]
    # Everything is in the file, and the old branch is one click away.
    reloaded = loop.run_until_complete(archive.call(archive.database.load, session.conversation.id))
    assert reloaded is not None
    assert len(reloaded.nodes) == 5
    assert session.show_variant(session.conversation.variants(session.conversation.messages[0])[0])
    assert [m.content for m in session.conversation.messages] == ["Question one", "second answer"]
    loop.run_until_complete(archive.flush())
    reloaded = loop.run_until_complete(archive.call(archive.database.load, session.conversation.id))
    assert reloaded is not None
    assert [m.content for m in reloaded.messages] == ["Question one", "second answer"]
    assert len(saved(path)) == 5


def test_the_oldest_turns_are_left_out_when_the_context_is_full(loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend(["ok"], n_ctx=160)
    session = open_session(
        loop, tmp_path / "h.sqlite3", backend, settings=GenerationSettings(max_tokens=16)
    )
    notices: list[str] = []
    session.notice.connect(notices.append)
    for n in range(4):
        session.send(f"prompt {n} " + "filler " * 25)
        finish(loop, session)
    sent = backend.received[-1]
    assert sent[-1]["content"].startswith("prompt 3")
    assert not any(m["content"].startswith("prompt 0") for m in sent)
    assert any("oldest messages were left out" in n for n in notices)
    # The conversation itself keeps everything; only what the model sees is shortened.
    assert len(session.conversation.messages) == 8
    loop.run_until_complete(session.close())
    loop.run_until_complete(session.archive.close())  # type: ignore[union-attr]


def test_a_prompt_longer_than_the_context_gets_a_sentence(loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend(["never"], n_ctx=100)
    session = open_session(loop, tmp_path / "h.sqlite3", backend)
    endings: list[tuple[str, str]] = []
    session.reply_ended.connect(lambda end: endings.append((end.status, end.note)))
    session.send("word " * 400)
    finish(loop, session)
    assert endings[0][0] == "error"
    assert "tokens long" in endings[0][1]
    assert session.conversation.messages[0].status == "error"  # the window gives it back
    assert backend.received == []
    loop.run_until_complete(session.close())
    loop.run_until_complete(session.archive.close())  # type: ignore[union-attr]


def test_export_then_import_through_the_session(loop: Loop, opened: Opened, tmp_path: Path) -> None:
    session, backend, _, _ = opened
    backend.rate = 0
    session.send("Export me")
    finish(loop, session)
    original = [(m.role, m.content) for m in session.conversation.messages]
    loop.run_until_complete(session.export_conversation(tmp_path / "c.json", "json"))
    loop.run_until_complete(session.export_conversation(tmp_path / "c.md", "markdown"))
    assert "## You\n\nExport me" in (tmp_path / "c.md").read_text(encoding="utf-8")
    loop.run_until_complete(session.new_conversation())
    assert loop.run_until_complete(session.import_conversation(tmp_path / "c.json"))
    assert [(m.role, m.content) for m in session.conversation.messages] == original
    listed = loop.run_until_complete(session.list_conversations())
    assert len(listed) == 2  # the original and the imported copy

    notices: list[str] = []
    session.notice.connect(notices.append)
    (tmp_path / "bad.json").write_text("{oops", encoding="utf-8")
    assert not loop.run_until_complete(session.import_conversation(tmp_path / "bad.json"))
    assert notices
    assert "could not be imported" in notices[0]
    assert [(m.role, m.content) for m in session.conversation.messages] == original


def test_a_damaged_history_file_still_lets_you_chat(loop: Loop, tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"\x00garbage" * 512)
    archive, problem = loop.run_until_complete(Archive.open(path))
    assert problem is not None
    assert archive.in_memory
    session = ChatSession(scripted_opener(ScriptedBackend(["fine"])), archive=archive)
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    session.send("Still here?")
    finish(loop, session)
    assert session.conversation.messages[-1].content == "fine"
    assert len(loop.run_until_complete(session.list_conversations())) == 1
    assert path.read_bytes() == b"\x00garbage" * 512
    loop.run_until_complete(session.close())
    loop.run_until_complete(archive.close())


# -- the sidebar and the message buttons in the real window --------------------------------


def fast_window(opened: Opened, qtbot: QtBot) -> MainWindow:
    session, backend, _, _ = opened
    backend.rate = 0
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    return window


def test_the_sidebar_lists_opens_renames_deletes_and_undoes(
    loop: Loop, opened: Opened, qtbot: QtBot
) -> None:
    session, _, archive, _ = opened
    window = fast_window(opened, qtbot)
    sidebar = window.sidebar
    for prompt in ("Pasta recipes", "Weather on Mars"):
        window.new_chat()
        run_until(loop, lambda: session.conversation.messages == [])
        window.composer.setPlainText(prompt)
        window.send()
        finish(loop, session)
    run_until(loop, lambda: sidebar.list.count() == 2)
    titles = [sidebar.list.item(i).text() for i in range(2)]
    assert titles == ["Weather on Mars", "Pasta recipes"]  # newest first

    sidebar.list.itemClicked.emit(sidebar.list.item(1))
    run_until(loop, lambda: session.conversation.title == "Pasta recipes")
    assert "Pasta recipes" in window.view.toPlainText()
    assert "Weather on Mars" not in window.view.toPlainText()

    sidebar.list.item(1).setText("Italian cooking")  # what editing in place does
    assert session.conversation.title == "Italian cooking"
    loop.run_until_complete(archive.flush())
    listed = loop.run_until_complete(session.list_conversations())
    assert [s.title for s in listed] == ["Weather on Mars", "Italian cooking"]

    sidebar.search.setText("mars")
    run_until(loop, lambda: sidebar.list.count() == 1)
    assert sidebar.list.item(0).text() == "Weather on Mars"
    sidebar.search.setText("")
    run_until(loop, lambda: sidebar.list.count() == 2)

    deleted = session.conversation.id
    window.delete_conversation(deleted)
    run_until(loop, lambda: sidebar.list.count() == 1)
    assert session.conversation.id != deleted  # the shown conversation was the deleted one
    assert window.undo_button.isVisible()
    window.undo_button.click()
    run_until(loop, lambda: sidebar.list.count() == 2 and session.conversation.id == deleted)
    assert not window.undo_button.isVisible()
    loop.run_until_complete(archive.flush())
    listed = loop.run_until_complete(session.list_conversations())
    assert {s.title for s in listed} == {"Italian cooking", "Weather on Mars"}


def test_regenerate_variants_and_edit_from_the_message_buttons(
    loop: Loop, opened: Opened, qtbot: QtBot
) -> None:
    session, backend, _, _ = opened
    window = fast_window(opened, qtbot)

    def headers() -> list[HeaderRow]:
        return [r for r in window.view.stack.rows if isinstance(r, HeaderRow)]

    backend.enqueue(["first"])
    window.composer.setPlainText("Ask")
    window.send()
    finish(loop, session)
    you, reply = headers()
    assert "regenerate" not in you.buttons
    assert reply.buttons["regenerate"].isVisibleTo(reply)

    backend.enqueue(["second"])
    qtbot.mouseClick(reply.buttons["regenerate"], Qt.MouseButton.LeftButton)
    finish(loop, session)
    you, reply = headers()
    assert reply.buttons["previous"].isEnabled()
    assert not reply.buttons["next"].isEnabled()
    assert "second" in window.view.toPlainText()
    qtbot.mouseClick(reply.buttons["previous"], Qt.MouseButton.LeftButton)
    assert "first" in window.view.toPlainText()
    assert "second" not in window.view.toPlainText()

    backend.enqueue(["edited answer"])
    you, _ = headers()
    qtbot.mouseClick(you.buttons["edit"], Qt.MouseButton.LeftButton)
    assert window.composer.toPlainText() == "Ask"
    assert window.edit_banner.isVisible()
    window.composer.setPlainText("Ask again")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    finish(loop, session)
    assert not window.edit_banner.isVisible()
    assert [m.content for m in session.conversation.messages] == ["Ask again", "edited answer"]
    you, _ = headers()
    assert you.buttons["previous"].isEnabled()  # the first version of the prompt is kept


def test_a_conversation_keeps_its_own_sampling_settings(loop: Loop, opened: Opened) -> None:
    session, backend, archive, _ = opened
    backend.rate = 0
    session.settings = GenerationSettings(temperature=0.7, max_tokens=100)
    session.send("with the app's settings")
    finish(loop, session)
    session.set_conversation_settings({"temperature": 0.1, "seed": 5, "top_k": "lots"})
    session.send("with its own")
    finish(loop, session)
    first, second = backend.sampled_with
    assert (first.temperature, first.seed) == (0.7, None)
    assert (second.temperature, second.seed, second.max_tokens) == (0.1, 5, 100)
    assert second.top_k == first.top_k  # the invalid value was ignored
    reloaded = loop.run_until_complete(archive.call(archive.database.load, session.conversation.id))
    assert reloaded is not None
    assert reloaded.settings == {"temperature": 0.1, "seed": 5, "top_k": "lots"}
    loop.run_until_complete(session.new_conversation())
    assert session.reply_settings() == session.settings  # a new chat starts with the app's


def test_switching_the_model_mid_reply_stops_it_and_the_chat_carries_on(
    loop: Loop, opened: Opened
) -> None:
    session, backend, _, _ = opened
    session.send("First, on the first model")
    run_until(loop, lambda: session.metrics.reply.pieces_shown >= 3)
    session.open_model(Path("another.gguf"))
    run_until(loop, lambda: not session.generating)
    run_until(loop, lambda: session.state is ModelState.READY)
    assert session.conversation.messages[-1].status == "stopped"
    assert session.model is not None
    assert session.model.name == "another"
    backend.rate = 0
    backend.enqueue(["answer from the other model"])
    session.send("And now?")
    finish(loop, session)
    replies = [m for m in session.conversation.messages if m.role == "assistant"]
    assert [r.model for r in replies] == ["scripted", "another"]
    assert len(backend.received[-1]) == 3  # the history came along to the new model


def test_a_long_conversation_is_built_in_slices_and_a_new_prompt_lands_last(
    loop: Loop, opened: Opened, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, backend, archive, _ = opened
    long = Conversation()
    for i in range(40):
        long.add("user", f"question {i}")
        long.add("assistant", f"answer {i}\n\n- a point\n- another point\n")
    loop.run_until_complete(archive.call(archive.database.save_all, long))
    window = fast_window(opened, qtbot)
    window.transcript.renderer.budget = 0.0  # one message per slice
    assert loop.run_until_complete(session.open_conversation(long.id))
    assert window.rendering  # the window is not held until all 80 messages are built
    run_until(loop, lambda: not window.rendering)
    text = window.view.toPlainText()
    assert text.index("question 0") < text.index("answer 39")

    loop.run_until_complete(session.new_conversation())
    assert session.conversation.id != long.id
    assert session.conversation.messages == []
    run_until(loop, lambda: not window.rendering)
    assert "question 0" not in window.view.toPlainText()  # the view was cleared
    assert loop.run_until_complete(session.open_conversation(long.id))
    assert window.rendering
    backend.enqueue(["the newest answer"])
    session.send("the newest question")  # while older messages are still being built
    finish(loop, session)
    text = window.view.toPlainText()
    assert (
        text.rindex("answer 39")
        < text.index("the newest question")
        < text.index("the newest answer")
    )
    assert not window.rendering


# -- imports: a bad file never touches the current conversation; any text is stored ------------


def test_a_json_bad_half_way_leaves_the_current_conversation_untouched(
    loop: Loop, opened: Opened, tmp_path: Path
) -> None:
    session, backend, _, path = opened
    backend.rate = 0
    session.send("What I was doing")
    finish(loop, session)
    before = [(m.role, m.content) for m in session.conversation.messages]
    shown = session.conversation.id
    other = Conversation()
    for n in range(10):
        other.add("user", f"imported question {n}")
        other.add("assistant", f"imported answer {n}")
    document = json.loads(to_json(other))
    document["messages"][13]["parent_id"] = "not in the file"  # half-way down
    (tmp_path / "half.json").write_text(json.dumps(document), encoding="utf-8")
    notices: list[str] = []
    session.notice.connect(notices.append)
    assert not loop.run_until_complete(session.import_conversation(tmp_path / "half.json"))
    assert notices == [
        "half.json could not be imported: message 14 follows a message that is not in the file"
    ]
    assert session.conversation.id == shown
    assert [(m.role, m.content) for m in session.conversation.messages] == before
    loop.run_until_complete(session.archive.flush())  # type: ignore[union-attr]
    assert len(saved(path)) == 2  # nothing of the import reached the file
    assert len(loop.run_until_complete(session.list_conversations())) == 1


def test_an_imported_lone_surrogate_is_stored_and_chatting_goes_on(
    loop: Loop, opened: Opened, tmp_path: Path
) -> None:
    # Issue 16: such a file killed the import half-way, and every later prompt failed.
    session, backend, _, path = opened
    backend.rate = 0
    other = Conversation()
    other.add("user", "a question")
    other.add("assistant", "an answer")
    document = json.loads(to_json(other))
    document["messages"][1]["content"] = "an answer with \ud800 inside"
    text = json.dumps(document)  # escapes: the file holds \ud800
    assert "\\ud800" in text
    (tmp_path / "surrogate.json").write_text(text, encoding="utf-8")
    assert loop.run_until_complete(session.import_conversation(tmp_path / "surrogate.json"))
    backend.enqueue(["still answering"])
    session.send("and after?")
    finish(loop, session)
    assert saved(path)[-3:] == [
        ("assistant", "complete", "an answer with \ufffd inside"),
        ("user", "complete", "and after?"),
        ("assistant", "complete", "still answering"),
    ]
    assert session.archive is not None
    assert not session.archive.failing


def test_a_reply_with_a_lone_surrogate_is_saved_whole(loop: Loop, opened: Opened) -> None:
    # Issue 16: the reply stayed in SQLite as "" with status streaming.
    session, backend, _, path = opened
    backend.rate = 0
    backend.enqueue(["model output ", "\udc80", " goes on"])
    session.send("say something odd")
    finish(loop, session)
    assert saved(path)[-1] == ("assistant", "complete", "model output \ufffd goes on")
    assert session.archive is not None
    assert not session.archive.failing


def test_a_save_failure_of_any_type_reaches_the_session_as_a_sentence(
    loop: Loop, opened: Opened
) -> None:
    session, backend, archive, path = opened
    backend.rate = 0
    notices: list[str] = []
    recovered: list[str] = []
    session.saving_failed.connect(notices.append)
    session.saving_recovered.connect(recovered.append)

    def broken(*args: object) -> None:
        raise RuntimeError("the disk went away")

    real = archive.database.save_messages
    archive.database.save_messages = broken  # type: ignore[method-assign]
    session.send("Is this kept?")
    finish(loop, session)
    run_until(loop, lambda: bool(notices))
    assert any("Saving the chat history failed (the disk went away)" in n for n in notices)
    assert archive.failing
    del archive.database.save_messages  # the real method again
    assert archive.database.save_messages == real
    backend.enqueue(["yes"])
    session.send("And now?")
    finish(loop, session)
    assert not archive.failing
    run_until(loop, lambda: bool(recovered))
    assert [content for _, _, content in saved(path)][-2:] == ["And now?", "yes"]


def test_the_window_keeps_saying_saving_fails_until_it_works_again(
    loop: Loop, opened: Opened, qtbot: QtBot
) -> None:
    session, backend, archive, _ = opened
    window = fast_window(opened, qtbot)
    backend.rate = 0

    def broken(*args: object) -> None:
        raise OSError(28, "No space left on device")

    archive.database.save_messages = broken  # type: ignore[method-assign]
    session.send("Is this kept?")
    finish(loop, session)
    run_until(loop, window.saving_banner.isVisible)
    assert "No space left on device" in window.saving_banner.label.text()
    assert window.saving_banner.export_button.isVisible()
    session.send("Still failing?")
    finish(loop, session)
    assert window.saving_banner.isVisible()  # it stays while saving fails

    del archive.database.save_messages  # the real method again
    session.send("And now?")
    finish(loop, session)
    run_until(loop, lambda: not window.saving_banner.isVisible())
