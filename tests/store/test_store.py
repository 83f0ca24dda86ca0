"""The conversation store: a real SQLite file, migrations, bad files, export and import."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from app.engine.backend import ChatMessage
from app.engine.context import PromptTooLongError, fit_to_context
from app.store.conversation import Conversation, title_from
from app.store.database import MIGRATIONS, Database, open_database
from app.store.exchange import NotAConversationError, from_json, to_json, to_markdown


def conversation_with_branches() -> Conversation:
    c = Conversation(system_prompt="Be brief.")
    first = c.add("user", "What is 2 + 2?")
    old = c.add("assistant", "5", status="stopped")
    c.leaf_id = first.id
    c.add("assistant", "4")  # regenerated: a sibling of "5"
    c.add("user", "And 3 + 3?")
    c.add("assistant", "6")
    edited = c.add("user", "What is 2 + 3?", parent_id=None, after_leaf=False)  # edit of first
    c.add("assistant", "5")
    assert c.variants(old)[0] is old
    assert c.variants(edited)[0] is first
    return c


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database, problem = open_database(tmp_path / "history.sqlite3")
    assert problem is None
    return database


def test_a_conversation_with_every_branch_survives_the_file(tmp_path: Path, db: Database) -> None:
    c = conversation_with_branches()
    db.save_all(c)
    db.close()
    again, problem = open_database(tmp_path / "history.sqlite3")
    assert problem is None
    loaded = again.load(c.id)
    assert loaded is not None
    assert loaded.system_prompt == "Be brief."
    assert loaded.title == "What is 2 + 2?"
    assert loaded.nodes == c.nodes
    assert [m.content for m in loaded.messages] == ["What is 2 + 3?", "5"]
    # The older branch is still there: flip the prompt back to its first version.
    first = loaded.variants(loaded.messages[0])[0]
    loaded.show_variant(first)
    assert [m.content for m in loaded.messages] == ["What is 2 + 2?", "4", "And 3 + 3?", "6"]
    assert again.integrity_ok()


def test_the_file_is_in_wal_mode(db: Database, tmp_path: Path) -> None:
    mode = sqlite3.connect(tmp_path / "history.sqlite3").execute("PRAGMA journal_mode").fetchone()
    assert mode[0] == "wal"


def test_list_is_newest_first_and_search_finds_titles_and_text(db: Database) -> None:
    older = Conversation(title="Cooking pasta", updated_at=100.0)
    older.add("user", "How long do I boil spaghetti? 100% al dente please")
    newer = Conversation(title="中文对话", updated_at=200.0)
    newer.add("user", "你好，世界")
    for c in (older, newer):
        db.save_conversation(c)
        db.save_messages(c.id, list(c.nodes.values()))
    assert [s.title for s in db.list_conversations()] == ["中文对话", "Cooking pasta"]
    assert [s.title for s in db.list_conversations("pasta")] == ["Cooking pasta"]
    assert [s.title for s in db.list_conversations("SPAGHETTI")] == ["Cooking pasta"]
    assert [s.title for s in db.list_conversations("世界")] == ["中文对话"]
    assert [s.title for s in db.list_conversations("100%")] == ["Cooking pasta"]
    assert db.list_conversations("0%_") == []  # % and _ are literal, not wildcards
    assert db.list_conversations("nothing like this") == []


def test_rename_delete_undo_and_purge(db: Database) -> None:
    c = Conversation()
    c.add("user", "hello")
    db.save_all(c)
    db.rename(c.id, "Greetings")
    assert [s.title for s in db.list_conversations()] == ["Greetings"]
    db.delete(c.id)
    assert db.list_conversations() == []
    assert db.load(c.id) is None
    db.undelete(c.id)
    assert [s.id for s in db.list_conversations()] == [c.id]
    db.delete(c.id)
    assert db.purge_deleted(older_than=3600) == 0  # still undoable
    assert db.purge_deleted(older_than=-1) == 1
    db.undelete(c.id)
    assert db.list_conversations() == []


def test_migrating_a_database_made_with_the_first_schema(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    raw = sqlite3.connect(path, isolation_level=None)
    old = Database(raw, path)
    assert old.migrate(MIGRATIONS[:1]) == 1
    raw.execute(
        "INSERT INTO conversations (id, title, system_prompt, model, created_at, updated_at,"
        " leaf_id) VALUES ('c1', 'From version 1', '', '', 1.0, 2.0, 'm2')"
    )
    raw.execute(
        "INSERT INTO messages VALUES ('m1', 'c1', NULL, 'user', 'hi', 'complete', '', '', 1.0)"
    )
    raw.execute(
        "INSERT INTO messages VALUES ('m2', 'c1', 'm1', 'assistant', 'hello', 'complete', '',"
        " 'SmolLM2', 1.5)"
    )
    raw.close()
    db, problem = open_database(path)
    assert problem is None
    assert db.version == len(MIGRATIONS) == 5
    assert db.load("c1").settings == {}  # type: ignore[union-attr]
    loaded = db.load("c1")
    assert loaded is not None
    assert [(m.role, m.content) for m in loaded.messages] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]
    assert loaded.messages[1].model == "SmolLM2"
    db.delete("c1")  # the column migration 2 added works
    assert db.list_conversations() == []


# -- files that cannot be used: a clear sentence, an in-memory store, the file untouched ----------


def test_a_corrupt_file_is_left_alone_and_the_app_runs_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    db, problem = open_database(path)
    assert problem is not None
    assert "damaged" in str(problem)
    assert str(path) in str(problem)
    assert db.path is None  # in memory
    c = Conversation()
    c.add("user", "still works")
    db.save_all(c)
    assert [s.title for s in db.list_conversations()] == ["still works"]
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["floodgate.sqlite3"]


def file_with_one_conversation(path: Path, prompt: str) -> None:
    database, _ = open_database(path)
    c = Conversation()
    c.add("user", prompt)
    database.save_all(c)
    database.close()


def test_a_file_locked_by_another_program_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    file_with_one_conversation(path, "written before the lock")
    before = path.read_bytes()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # what another program writing to it holds
    try:
        db, problem = open_database(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert problem is not None
    assert "in use by another program" in str(problem)
    assert db.path is None
    assert path.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to read-only files")
def test_a_read_only_file_is_shown_but_not_written(tmp_path: Path) -> None:
    path = tmp_path / "floodgate.sqlite3"
    file_with_one_conversation(path, "kept from before")
    path.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        db, problem = open_database(path)
        assert problem is not None
        assert "cannot be written to" in str(problem)
        assert [s.title for s in db.list_conversations()] == ["kept from before"]
    finally:
        tmp_path.chmod(0o755)
        path.chmod(0o644)


def test_a_file_the_system_says_is_read_only_is_shown_but_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same decision as the test above, for machines where it is skipped (root): here the
    # system's answer to "may I write?" is no, whoever asks.
    path = tmp_path / "floodgate.sqlite3"
    file_with_one_conversation(path, "kept from before")
    before = path.read_bytes()
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK)
    db, problem = open_database(path)
    assert problem is not None
    assert "cannot be written to" in str(problem)
    assert db.path is None
    assert [s.title for s in db.list_conversations()] == ["kept from before"]
    assert path.read_bytes() == before


def test_a_data_folder_that_cannot_be_created_gives_a_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    db, problem = open_database(blocker / "floodgate.sqlite3")
    assert problem is not None
    assert "cannot be opened" in str(problem)
    assert db.path is None
    assert blocker.read_text() == "a file where the data folder should be"


# -- export and import ---------------------------------------------------------------------------


def test_json_export_imports_back_with_every_branch_and_fresh_ids() -> None:
    c = conversation_with_branches()
    imported = from_json(to_json(c))
    assert imported.id != c.id
    assert set(imported.nodes).isdisjoint(c.nodes)
    assert imported.title == c.title
    assert imported.system_prompt == c.system_prompt
    assert [(m.role, m.content, m.status) for m in imported.messages] == [
        (m.role, m.content, m.status) for m in c.messages
    ]
    assert len(imported.nodes) == len(c.nodes)
    twice = from_json(to_json(c))
    assert set(twice.nodes).isdisjoint(imported.nodes)


def test_markdown_export_reads_as_the_conversation() -> None:
    c = conversation_with_branches()
    c.messages[-1].model = "SmolLM2"
    text = to_markdown(c)
    assert text.startswith("# What is 2 + 2?")
    assert "> Be brief." in text
    assert "## You\n\nWhat is 2 + 3?" in text
    assert "## SmolLM2\n\n5" in text
    assert "And 3 + 3?" not in text  # only the branch shown


@pytest.mark.parametrize(
    "text",
    [
        "not json at all",
        "[1, 2, 3]",
        '{"format": "something-else"}',
        '{"format": "floodgate-conversation", "version": 99, "messages": []}',
        '{"format": "floodgate-conversation", "version": 1, "messages": [{"id": "x"}]}',
        '{"format": "floodgate-conversation", "version": 1, "messages": '
        '[{"id": "x", "parent_id": null, "role": "root", "content": "hi"}]}',
    ],
)
def test_importing_something_else_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(NotAConversationError):
        from_json(text)


def test_titles_come_from_the_first_line_of_the_first_prompt() -> None:
    assert title_from("  Plan a trip\nto Rome in May") == "Plan a trip"
    long = title_from("word " * 40)
    assert len(long) <= 60
    assert long.endswith("…")


# -- fitting the context ---------------------------------------------------------------------------


def turns(*contents: str) -> list[ChatMessage]:
    roles = ["user", "assistant"]
    return [ChatMessage(role=roles[i % 2], content=c) for i, c in enumerate(contents)]  # type: ignore[typeddict-item]


def words(text: str) -> int:
    return len(text.split())


def test_the_oldest_turns_are_left_out_first_question_and_answer_together() -> None:
    system = ChatMessage(role="system", content="sys")
    history = [system, *turns("one " * 20, "two " * 20, "three " * 20, "four " * 20, "five")]
    kept, dropped = fit_to_context(history, words, budget=80)
    assert dropped == 2
    assert [m["content"].split()[0] for m in kept] == ["sys", "three", "four", "five"]
    kept, dropped = fit_to_context(history, words, budget=1000)
    assert (kept, dropped) == (history, 0)


def test_a_prompt_too_long_on_its_own_is_an_error() -> None:
    with pytest.raises(PromptTooLongError) as raised:
        fit_to_context(turns("word " * 500), words, budget=100)
    assert raised.value.tokens > 100


# -- attachments: kept with their prompt, found by search, carried by export and import ---------


def notes_attachment(text: str = "The dog is called Biscuit.\n") -> dict[str, object]:
    return {
        "name": "notes.txt",
        "kind": "text",
        "size": len(text.encode(errors="replace")),
        "text": text,
        "tokens": 17,
        "cut": False,
        "encoding": "utf-8",
        "pages": None,
        "kept_tokens": None,
        "full_tokens": None,
    }


def conversation_with_attachments() -> Conversation:
    c = Conversation()
    report = dict(notes_attachment("Quarterly ```fenced``` report\n"), name="report.pdf")
    report.update(kind="pdf", pages=3, encoding=None, cut=True, kept_tokens=40, full_tokens=90)
    c.add("user", "What is the dog called?", attachments=[notes_attachment(), report])
    c.add("assistant", "Biscuit.")
    return c


def test_attachments_survive_the_file_in_order_with_every_field(
    tmp_path: Path, db: Database
) -> None:
    c = conversation_with_attachments()
    db.save_all(c)
    db.close()
    again, _ = open_database(tmp_path / "history.sqlite3")
    loaded = again.load(c.id)
    assert loaded is not None
    prompt = loaded.messages[0]
    assert prompt.content == "What is the dog called?"  # Copy copies the question alone
    assert [a["name"] for a in prompt.attachments] == ["notes.txt", "report.pdf"]
    assert prompt.attachments == c.messages[0].attachments
    assert loaded.messages[1].attachments == []
    # Saving the prompt again replaces its rows rather than adding to them.
    again.save_messages(c.id, [prompt])
    rows = sqlite3.connect(tmp_path / "history.sqlite3").execute(
        "SELECT position, name, kind, size, tokens, cut, pages FROM attachments ORDER BY position"
    )
    assert rows.fetchall() == [
        (0, "notes.txt", "text", 27, 17, 0, None),
        (1, "report.pdf", "pdf", 30, 17, 1, 3),
    ]


def test_attachment_text_with_lone_surrogates_is_stored_replaced(db: Database) -> None:
    c = Conversation()
    c.add("user", "read", attachments=[notes_attachment("bad \ud800 text\n")])
    db.save_all(c)
    loaded = db.load(c.id)
    assert loaded is not None
    assert loaded.messages[0].attachments[0]["text"] == "bad \ufffd text\n"


def test_search_finds_a_word_inside_an_attachment_and_its_name(db: Database) -> None:
    db.save_all(conversation_with_attachments())
    plain = Conversation(title="Other")
    plain.add("user", "nothing attached")
    db.save_all(plain)
    assert [s.title for s in db.list_conversations("biscuit")] == ["What is the dog called?"]
    assert [s.title for s in db.list_conversations("report.pdf")] == ["What is the dog called?"]
    assert db.list_conversations("quarterly report") == []


def test_deleting_a_conversation_for_good_removes_its_attachments(
    tmp_path: Path, db: Database
) -> None:
    c = conversation_with_attachments()
    db.save_all(c)
    db.delete(c.id)
    assert db.purge_deleted(older_than=-1) == 1
    count = sqlite3.connect(tmp_path / "history.sqlite3").execute(
        "SELECT count(*) FROM attachments"
    )
    assert count.fetchone()[0] == 0


def test_migrating_a_real_file_of_the_previous_schema_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite3"
    old, _ = open_database(path, backups=False)
    old.close()
    # Make it a version-3 file for real: as Floodgate left it before attachments existed.
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("DROP TABLE attachments")
    raw.execute("PRAGMA user_version = 3")
    raw.close()
    before = Conversation(title="Before attachments")
    before.add("user", "hi")
    before.add("assistant", "hello")
    raw_db = Database(sqlite3.connect(path, isolation_level=None), path)
    assert raw_db.version == 3
    raw_db._db.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at, leaf_id)"
        " VALUES ('c1', 'Before attachments', 1.0, 2.0, 'm2')"
    )
    raw_db._db.execute(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, status, created_at)"
        " VALUES ('m1', 'c1', NULL, 'user', 'hi', 'complete', 1.0),"
        " ('m2', 'c1', 'm1', 'assistant', 'hello', 'complete', 1.5)"
    )
    raw_db.close()
    db, problem = open_database(path, backups=False)
    assert problem is None
    assert db.version == len(MIGRATIONS)
    loaded = db.load("c1")
    assert loaded is not None
    assert [(m.content, m.attachments) for m in loaded.messages] == [("hi", []), ("hello", [])]
    c = conversation_with_attachments()
    db.save_all(c)
    assert db.load(c.id).messages[0].attachments[0]["name"] == "notes.txt"  # type: ignore[union-attr]


def test_json_export_and_import_carry_attachments() -> None:
    c = conversation_with_attachments()
    text = to_json(c)
    again = from_json(text)
    assert again.messages[0].attachments == c.messages[0].attachments
    assert again.messages[0].content == "What is the dog called?"


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "image"},
        {"text": None},
        {"size": -1},
        {"tokens": "many"},
        {"cut": "yes"},
        {"name": 3},
    ],
)
def test_json_import_refuses_a_bad_attachment_with_a_sentence(change: dict[str, object]) -> None:
    c = conversation_with_attachments()
    document = json.loads(to_json(c))
    document["messages"][0]["attachments"][1].update(change)
    with pytest.raises(NotAConversationError) as refused:
        from_json(json.dumps(document))
    assert "message 1, attachment 2" in str(refused.value)


def test_json_import_refuses_attachments_that_are_not_a_list() -> None:
    document = json.loads(to_json(conversation_with_attachments()))
    document["messages"][0]["attachments"] = {"name": "x"}
    with pytest.raises(NotAConversationError, match="attachments"):
        from_json(json.dumps(document))


def test_markdown_export_shows_each_attachment_fenced_before_the_question() -> None:
    text = to_markdown(conversation_with_attachments())
    assert (
        "**Attached: notes.txt** (text, 27 B, 17 tokens)\n\n```\nThe dog is called Biscuit.\n```"
        in text
    )
    # The report holds a run of three backticks: its fence is longer, so nothing inside closes it.
    assert "**Attached: report.pdf** (pdf, 30 B, 17 tokens, cut)\n\n````\nQuarterly" in text
    assert text.index("Biscuit.\n```") < text.index("````\n\nWhat is the dog called?\n\n## ")
