"""Attachments through the flow: to the model inside the user's turn, kept, counted, reused."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QTextCursor
from pytestqt.qtbot import QtBot

from app.documents import Attachment, content_with_attachments, read_document
from app.engine import EngineOptions, GenerationSettings, StopSignal
from app.engine.llama import open_llama
from app.flow.archive import Archive
from app.flow.attachments import AttachmentReader
from app.flow.reply import prompt_for_model
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.ui.chat.rows.text import HeaderRow
from app.ui.chat.transcript import AttachmentDialog
from app.ui.composer.attachment_tray import ChipState
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_for, run_until
from tests.support.window import open_window

FACT = "The lighthouse keeper's cat is named Biscuit.\n"


def attachment(tmp_path: Path, text: str = FACT, name: str = "facts.txt") -> Attachment:
    path = tmp_path / name
    path.write_text(text)
    return Attachment.from_document(read_document(path), tokens=len(text.split()))


def ready(loop: Loop, backend: ScriptedBackend, archive: Archive | None = None) -> ChatSession:
    session = ChatSession(scripted_opener(backend), archive=archive)
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    return session


def test_the_files_go_fenced_before_the_question_and_the_same_on_every_turn(
    loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(["Biscuit."], rate=1000)
    session = ready(loop, backend)
    facts = attachment(tmp_path)
    assert session.send("What is the cat's name?", [facts])
    run_until(loop, lambda: not session.generating)
    prompt = session.conversation.messages[0]
    assert prompt.content == "What is the cat's name?"  # Copy copies the question
    assert prompt.attachments == [facts.to_dict()]
    first = backend.received[-1][-1]["content"]
    assert first == content_with_attachments([facts], "What is the cat's name?")
    assert first.startswith("File: facts.txt\n```\n" + FACT + "```\n\nWhat is")
    backend.enqueue(["Grey."])
    assert session.send("What colour is it?")
    run_until(loop, lambda: not session.generating)
    # The earlier turn reaches the model byte for byte as before: its processed prefix is reused.
    assert backend.received[-1][0]["content"] == first
    assert backend.received[-1][-1]["content"] == "What colour is it?"


def test_blank_text_is_sent_only_with_files(loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend(["ok"], rate=1000)
    session = ready(loop, backend)
    assert not session.send("   ")
    assert session.send("", [attachment(tmp_path)])
    run_until(loop, lambda: not session.generating)
    assert backend.received[-1][-1]["content"].endswith("```\n\n")
    assert session.conversation.title == "facts.txt"


def test_edit_and_regenerate_keep_the_attachments(loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend(["one"], rate=1000)
    session = ready(loop, backend)
    facts = attachment(tmp_path)
    session.send("Name?", [facts])
    run_until(loop, lambda: not session.generating)
    backend.enqueue(["two"])
    assert session.regenerate()
    run_until(loop, lambda: not session.generating)
    assert "Biscuit" in backend.received[-1][-1]["content"]
    backend.enqueue(["three"])
    assert session.edit_and_resend(session.conversation.messages[0], "The cat's name?")
    run_until(loop, lambda: not session.generating)
    edited = session.conversation.messages[0]
    assert edited.content == "The cat's name?"
    assert edited.attachments == [facts.to_dict()]
    assert backend.received[-1][-1]["content"] == content_with_attachments(
        [facts], "The cat's name?"
    )


def test_tokens_are_counted_on_the_worker_from_another_thread(loop: Loop) -> None:
    backend = ScriptedBackend(rate=1000)
    session = ChatSession(scripted_opener(backend))
    counted: list[int | None] = []
    # No model yet: None, at once.
    thread = threading.Thread(target=lambda: counted.append(session.count_tokens("a b")))
    thread.start()
    thread.join(5)
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    thread = threading.Thread(target=lambda: counted.append(session.count_tokens("one two three")))
    thread.start()
    thread.join(5)
    loop.run_until_complete(session.close())
    # After quit nothing serves the worker's jobs: a count is None, never a wait forever.
    thread = threading.Thread(target=lambda: counted.append(session.count_tokens("x")))
    thread.start()
    thread.join(5)
    assert counted == [None, 3, None]


def test_the_room_left_is_the_context_less_the_reply_and_the_conversation(
    loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(["a b c"], rate=1000)
    session = ready(loop, backend)
    n_ctx = backend.info.n_ctx
    budget = n_ctx - min(session.reply_settings().max_tokens, n_ctx // 4)
    assert loop.run_until_complete(session.room_for_attachments()) == budget - 8
    session.send("one two", [attachment(tmp_path)])
    run_until(loop, lambda: not session.generating)
    turns = [c for _, c in session.conversation.history(prompt_for_model)]
    used = sum(len(c.split()) + 8 for c in turns)
    assert loop.run_until_complete(session.room_for_attachments()) == budget - used - 8


def test_the_reader_counts_with_the_session_and_says_the_time_to_read(
    loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(rate=1000)
    session = ready(loop, backend)
    session.prefill_rate = 2.0
    reader = AttachmentReader(session.count_tokens, prefill_rate=lambda: session.prefill_rate)
    ready_files: list[tuple[Attachment, object]] = []
    reader.ready.connect(lambda ready: ready_files.append((ready.attachment, ready.seconds)))
    (tmp_path / "facts.txt").write_text(FACT)
    reader.read([tmp_path / "facts.txt"])
    run_until(loop, lambda: bool(ready_files))
    read, seconds = ready_files[0]
    fenced_words = len(("File: facts.txt\n```\n" + FACT + "```").split())
    assert read.tokens == fenced_words
    assert seconds == fenced_words / 2.0
    loop.run_until_complete(reader.close())


def test_attachments_are_there_after_a_restart(loop: Loop, tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    archive, _ = loop.run_until_complete(Archive.open(path))
    session = ready(loop, ScriptedBackend(["Biscuit."], rate=1000), archive)
    facts = attachment(tmp_path)
    session.send("Name?", [facts])
    run_until(loop, lambda: not session.generating)
    conversation_id = session.conversation.id
    loop.run_until_complete(session.close())
    loop.run_until_complete(archive.flush())
    loop.run_until_complete(archive.close())

    archive, _ = loop.run_until_complete(Archive.open(path))
    again = ready(loop, ScriptedBackend(["Grey."], rate=1000), archive)
    assert loop.run_until_complete(again.open_conversation(conversation_id))
    assert again.conversation.messages[0].attachments == [facts.to_dict()]
    listed = loop.run_until_complete(again.list_conversations("lighthouse"))
    assert [s.id for s in listed] == [conversation_id]
    loop.run_until_complete(again.close())
    loop.run_until_complete(archive.close())


# The real model.


@pytest.mark.model
def test_the_real_model_reads_the_file_once_and_answers_from_it(
    loop: Loop, tmp_path: Path, model_path: Path
) -> None:
    from app.engine.chat_template import ChatTemplate
    from app.engine.model_card import read_chat_template

    session = ChatSession(open_llama, options=EngineOptions(n_threads=2))
    session.settings = dataclasses.replace(session.settings, temperature=0.0, max_tokens=24)
    session.open_model(model_path)
    run_until(loop, lambda: session.state is ModelState.READY, timeout=60)
    # Long enough that reading it shows in the figures.
    text = "".join(f"Line {n}: the tide table for day {n} is unchanged.\n" for n in range(30))
    facts = attachment(tmp_path, text + FACT)
    assert session.send("What is the cat's name?", [facts])
    run_until(loop, lambda: not session.generating, timeout=120)
    reply = session.conversation.messages[-1].content
    first_prompt = session.metrics.prompt_tokens
    assert session.prefill_rate is not None
    assert session.prefill_rate > 0

    rendered = ChatTemplate(read_chat_template(model_path), bos_token="", eos_token="").render(
        [{"role": r, "content": c} for r, c in session.conversation.history(prompt_for_model)],
        StopSignal(),
    )
    assert "File: facts.txt\n```\nLine 0: " in rendered.text
    assert FACT + "```\n\nWhat is the cat's name?" in rendered.text
    assert rendered.text.index("Biscuit") < rendered.text.index("What is the cat's name?")
    assert "Biscuit" in reply, reply

    assert session.send("Say it again.")
    run_until(loop, lambda: not session.generating, timeout=120)
    # The document (all of the first prompt) came from the cache, not read again.
    assert session.metrics.cached_tokens >= first_prompt, (
        session.metrics.cached_tokens,
        first_prompt,
    )
    loop.run_until_complete(session.close())


# The window.


def headers(window: MainWindow) -> list[HeaderRow]:
    return [r for r in window.view.stack.rows if isinstance(r, HeaderRow)]


def file_urls(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def test_attach_remove_by_keyboard_send_and_open_the_chip(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(["Biscuit."], rate=1000)
    window = open_window(qtbot, ready(loop, backend))
    tray = window.tray
    assert window.attach_button.accessibleName() == "Attach files"
    assert "Ctrl+Shift+A" in window.attach_button.toolTip()
    assert window.menus.attach_action.shortcut().toString() == "Ctrl+Shift+A"
    (tmp_path / "facts.txt").write_text(FACT)
    (tmp_path / "other.py").write_text("print('hi')\n")
    window.attach([tmp_path / "facts.txt", tmp_path / "other.py"])
    run_until(loop, lambda: tray.names() and not tray.busy)
    assert [a.name for a in tray.attachments()] == ["facts.txt", "other.py"]
    summary = tray.chip("facts.txt").summary.text()  # type: ignore[union-attr]
    assert "facts.txt" in summary
    assert "tokens" in summary
    run_until(loop, lambda: tray.total.isVisible() and "left in the context" in tray.total.text())
    window.grab().save(str(tmp_path / "tray.png"))

    remove = tray.chip("other.py").remove_button  # type: ignore[union-attr]
    remove.setFocus()
    qtbot.keyClick(remove, Qt.Key.Key_Space)
    assert tray.names() == ["facts.txt"]

    window.composer.setPlainText("What is the cat's name?")
    qtbot.keyClick(window.composer, Qt.Key.Key_Return)
    run_until(loop, lambda: not window.session.generating and bool(backend.received))
    assert backend.received[-1][-1]["content"].startswith("File: facts.txt\n```\n" + FACT)
    assert tray.names() == []
    assert not tray.isVisible()

    chips = [b for k, b in headers(window)[0].buttons.items() if k.startswith("attachment")]
    assert len(chips) == 1
    assert chips[0].text().endswith("facts.txt · 11 tokens")
    assert chips[0].isVisible()
    header = headers(window)[0]
    run_until(loop, lambda: chips[0].x() > 0)
    others = [b for k, b in header.buttons.items() if b.isVisible() and b is not chips[0]]
    assert chips[0].geometry().right() < min(b.x() for b in others)  # beside them, not over
    assert chips[0].y() == header.buttons["copy"].y()
    assert header.controls()[0] is chips[0]  # Tab reaches it first in the message
    window.grab().save(str(tmp_path / "window.png"))
    chips[0].click()
    dialogs = [w for w in window.findChildren(AttachmentDialog) if w.isVisible()]
    assert len(dialogs) == 1
    assert dialogs[0].text.toPlainText() == FACT
    assert dialogs[0].text.isReadOnly()
    dialogs[0].close()


def test_drop_and_paste_files_attach_them_and_text_stays_text(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    window = open_window(qtbot, ready(loop, ScriptedBackend(rate=1000)))
    (tmp_path / "dropped.md").write_text("# Dropped\n")
    (tmp_path / "pasted.csv").write_text("a,b\n1,2\n")
    mime = file_urls(tmp_path / "dropped.md")
    position = QPointF(window.rect().center())
    drop = QDropEvent(
        position,
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    window.dropEvent(drop)
    assert drop.isAccepted()
    window.composer.setPlainText("keep me")
    window.composer.insertFromMimeData(file_urls(tmp_path / "pasted.csv"))
    assert window.composer.toPlainText() == "keep me"  # no file address typed in
    run_until(loop, lambda: len(window.tray.attachments()) == 2)
    assert window.tray.names() == ["dropped.md", "pasted.csv"]
    text = QMimeData()
    text.setText(" and more")
    window.composer.moveCursor(QTextCursor.MoveOperation.End)
    window.composer.insertFromMimeData(text)
    assert window.composer.toPlainText() == "keep me and more"
    assert window.composer.canInsertFromMimeData(file_urls(tmp_path / "pasted.csv"))


def test_a_bad_file_gets_its_sentence_and_the_prompt_is_untouched(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(["ok"], rate=1000)
    window = open_window(qtbot, ready(loop, backend))
    (tmp_path / "photo.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    (tmp_path / "facts.txt").write_text(FACT)
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.md").write_text("")
    window.composer.setPlainText("my question")
    # A PNG's first bytes and nothing else: a damaged picture, whatever its name says.
    bad = {"photo.txt": "is damaged", "folder": "is a folder", "empty.md": "is empty"}
    window.attach([*(tmp_path / name for name in bad), tmp_path / "facts.txt"])
    run_until(loop, lambda: len(window.tray.names()) == 4 and not window.tray.busy)
    for name, sentence in bad.items():
        chip = window.tray.chip(name)
        assert chip is not None
        assert sentence in chip.problem.text()
        assert chip.problem.isVisible()
    assert [a.name for a in window.tray.attachments()] == ["facts.txt"]
    assert window.composer.toPlainText() == "my question"
    window.send()  # the bad one is not sent; the good one is
    run_until(loop, lambda: bool(backend.received) and not window.session.generating)
    sent = backend.received[-1][-1]["content"]
    assert "File: facts.txt" in sent
    assert "photo" not in sent


def test_send_waits_while_a_file_is_being_read(qtbot: QtBot, loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend(["ok"], rate=1000)
    window = open_window(qtbot, ready(loop, backend))
    counting = threading.Event()
    release = threading.Event()

    def slow_count(text: str) -> int:
        counting.set()
        release.wait(10)
        return len(text.split())

    window.reader.count_tokens = slow_count
    (tmp_path / "facts.txt").write_text(FACT)
    window.attach([tmp_path / "facts.txt"])
    run_until(loop, counting.is_set)
    window.composer.setPlainText("Name?")
    window.send()
    assert backend.received == []
    assert "still being read" in window.statusBar().currentMessage()
    release.set()
    run_until(loop, lambda: bool(window.tray.attachments()))
    window.send()
    run_until(loop, lambda: bool(backend.received) and not window.session.generating)
    assert "File: facts.txt" in backend.received[-1][-1]["content"]


def test_edit_in_the_window_keeps_the_files_and_copy_copies_the_question(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(["one"], rate=1000)
    window = open_window(qtbot, ready(loop, backend))
    window.session.send("Name?", [attachment(tmp_path)])
    run_until(loop, lambda: not window.session.generating and len(headers(window)) == 2)
    prompt_header = headers(window)[0]
    assert prompt_header.message_text() == "Name?"
    prompt_header.buttons["edit"].click()
    assert window.composer.toPlainText() == "Name?"
    window.composer.setPlainText("The cat's name?")
    backend.enqueue(["two"])
    window.send()
    run_until(loop, lambda: len(backend.received) == 2 and not window.session.generating)
    edited = window.session.conversation.messages[0]
    assert edited.content == "The cat's name?"
    assert [a["name"] for a in edited.attachments] == ["facts.txt"]
    assert backend.received[-1][-1]["content"].startswith("File: facts.txt\n")


def test_send_refuses_while_files_do_not_fit(qtbot: QtBot, loop: Loop, tmp_path: Path) -> None:
    backend = ScriptedBackend(["ok"], rate=1000)
    window = open_window(qtbot, ready(loop, backend))
    (tmp_path / "facts.txt").write_text(FACT * 40)
    window.attach([tmp_path / "facts.txt"])
    run_until(loop, lambda: bool(window.tray.attachments()))
    run_for(loop, 0.1)  # the room was measured
    window.tray.set_room(10)
    window.composer.setPlainText("Too much?")
    window.send()
    assert backend.received == []
    assert "do not fit" in window.statusBar().currentMessage()
    assert window.composer.toPlainText() == "Too much?"
    assert window.tray.names() == ["facts.txt"]


def test_the_part_that_fits_is_sent_marked_cut_and_shown_cut(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    backend = ScriptedBackend(["ok"], rate=1000)
    window = open_window(qtbot, ready(loop, backend))
    lines = "".join(f"Line {n} of the long log.\n" for n in range(400))
    (tmp_path / "long.log").write_text(lines)
    window.attach([tmp_path / "long.log"])
    run_until(loop, lambda: bool(window.tray.attachments()))
    run_for(loop, 0.1)  # the room was measured
    window.tray.set_room(300)
    chip = window.tray.chip("long.log")
    assert chip is not None
    assert chip.include_button.isVisible()
    assert "more than the 300 left" in chip.problem.text()
    chip.include_button.click()
    run_until(loop, lambda: window.tray.state("long.log") is not ChipState.READING)
    assert chip.problem.text() == ""
    assert window.tray.attachments()[0].cut
    cut = window.tray.attachments()[0]
    assert cut.tokens is not None
    assert cut.tokens <= 300
    window.composer.setPlainText("What is in the log?")
    window.send()
    run_until(loop, lambda: bool(backend.received) and not window.session.generating)
    sent = backend.received[-1][-1]["content"]
    assert "[cut: the first " in sent
    assert "Line 399" not in sent
    chips = [b for k, b in headers(window)[0].buttons.items() if k.startswith("attachment")]
    assert chips[0].text().endswith(" · cut")


def test_the_chip_is_in_the_prompt_after_a_restart(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    path = tmp_path / "history.sqlite3"
    archive, _ = loop.run_until_complete(Archive.open(path))
    session = ready(loop, ScriptedBackend(["Biscuit."], rate=1000), archive)
    session.send("Name?", [attachment(tmp_path)])
    run_until(loop, lambda: not session.generating)
    conversation_id = session.conversation.id
    loop.run_until_complete(session.close())
    loop.run_until_complete(archive.flush())
    loop.run_until_complete(archive.close())

    archive, _ = loop.run_until_complete(Archive.open(path))
    window = open_window(qtbot, ready(loop, ScriptedBackend(rate=1000), archive))
    window.open_conversation(conversation_id)
    run_until(loop, lambda: len(headers(window)) == 2 and not window.rendering)
    chips = [b for k, b in headers(window)[0].buttons.items() if k.startswith("attachment")]
    assert [c.text().removeprefix("\N{PAPERCLIP} ") for c in chips] == ["facts.txt · 7 tokens"]
    loop.run_until_complete(window.session.close())
    loop.run_until_complete(archive.close())


@pytest.mark.model
def test_the_real_window_counts_sends_and_then_says_the_time_to_read(
    qtbot: QtBot, loop: Loop, tmp_path: Path, model_path: Path
) -> None:
    session = ChatSession(
        open_llama,
        options=EngineOptions(n_threads=2),
        settings=GenerationSettings(temperature=0.0, max_tokens=16),
    )
    window = open_window(qtbot, session)
    window.open_model(model_path)
    run_until(loop, lambda: session.state is ModelState.READY, timeout=60)
    (tmp_path / "facts.txt").write_text(FACT)
    window.attach([tmp_path / "facts.txt"])
    run_until(loop, lambda: bool(window.tray.attachments()), timeout=30)
    counted = window.tray.attachments()[0].tokens
    assert counted == loop.run_until_complete(
        asyncio.to_thread(session.count_tokens, "File: facts.txt\n```\n" + FACT + "```")
    )
    assert session.prefill_rate is None  # nothing measured yet: no time is guessed
    assert "to read" not in window.tray.chip("facts.txt").summary.text()  # type: ignore[union-attr]
    window.composer.setPlainText("What is the cat's name?")
    window.send()
    run_until(loop, lambda: not session.generating and len(headers(window)) == 2, timeout=60)
    assert "Biscuit" in session.conversation.messages[-1].content
    assert session.prefill_rate is not None

    (tmp_path / "more.txt").write_text("The keeper's dog is named Pepper.\n" * 20)
    window.attach([tmp_path / "more.txt"])
    run_until(loop, lambda: bool(window.tray.attachments()), timeout=30)
    assert "s to read" in window.tray.chip("more.txt").summary.text()  # type: ignore[union-attr]
