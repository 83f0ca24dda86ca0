"""Every text storable: lone surrogates from any source, imports checked whole before use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.store.conversation import Conversation
from app.store.database import Database, open_database
from app.store.exchange import NotAConversationError, read_json, to_json, to_markdown
from app.store.text import storable_text


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database, problem = open_database(tmp_path / "history.sqlite3", backups=False)
    assert problem is None
    return database


def test_valid_text_is_returned_as_it_is() -> None:
    text = "plain, 中文, emoji 😀, U+FFFD kept: \ufffd"
    fixed, replaced = storable_text(text)
    assert fixed is text
    assert not replaced


def test_lone_surrogates_become_replacement_characters() -> None:
    assert storable_text("a\ud800b") == ("a\ufffdb", True)
    assert storable_text("\udc00") == ("\ufffd", True)
    assert storable_text("\ud800\ud800\udc00") == ("\ufffd\U00010000", True)  # a lone, a pair
    assert storable_text("end\udbff") == ("end\ufffd", True)


def test_a_pair_given_as_two_code_units_becomes_its_character() -> None:
    assert storable_text("smile \ud83d\ude00") == ("smile 😀", False)


def reference(text: str) -> str:
    """What storable_text should give, written the slow, obvious way."""
    out, i = [], 0
    while i < len(text):
        unit = ord(text[i])
        nxt = ord(text[i + 1]) if i + 1 < len(text) else 0
        if 0xD800 <= unit <= 0xDBFF and 0xDC00 <= nxt <= 0xDFFF:
            out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (nxt - 0xDC00)))
            i += 2
            continue
        out.append("\ufffd" if 0xD800 <= unit <= 0xDFFF else text[i])
        i += 1
    return "".join(out)


any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


@given(any_text)
def test_any_text_becomes_storable_the_same_way_as_the_reference(text: str) -> None:
    fixed, replaced = storable_text(text)
    fixed.encode("utf-8")  # never raises
    assert fixed == reference(text)
    assert replaced == (fixed.count("\ufffd") > text.count("\ufffd"))
    assert storable_text(fixed) == (fixed, False)  # once is enough


@settings(max_examples=60, deadline=None)
@given(prompt=any_text, reply=any_text, title=any_text)
def test_any_text_round_trips_through_the_file(
    tmp_path_factory: pytest.TempPathFactory, prompt: str, reply: str, title: str
) -> None:
    path = tmp_path_factory.mktemp("round") / "history.sqlite3"
    db, _ = open_database(path, backups=False)
    c = Conversation(system_prompt=reply)
    c.add("user", prompt)
    c.add("assistant", reply, status="stopped").note = prompt
    c.title = title
    db.save_all(c)  # never raises, whatever the text
    db.close()
    again, _ = open_database(path, backups=False)
    loaded = again.load(c.id)
    again.close()
    assert loaded is not None
    assert loaded.title == storable_text(title).text
    assert loaded.system_prompt == storable_text(reply).text
    assert [(m.content, m.note) for m in loaded.messages] == [
        (storable_text(prompt).text, ""),
        (storable_text(reply).text, storable_text(prompt).text),
    ]


def test_saving_text_with_a_lone_surrogate_never_fails(db: Database) -> None:
    # What issue 16 saw: a reply with '\ud800' from the model stayed "" with status streaming.
    c = Conversation(title="bad \ud800 title")
    c.add("user", "question")
    reply = c.add("assistant", "", status="streaming")
    db.save_all(c)
    reply.content = "half \udfff"
    db.save_messages(c.id, [reply])
    reply.content += " and the rest"
    reply.status = "complete"
    db.save_messages(c.id, [reply])
    db.rename(c.id, "renamed \ud800")
    loaded = db.load(c.id)
    assert loaded is not None
    assert loaded.messages[-1].content == "half \ufffd and the rest"
    assert loaded.messages[-1].status == "complete"
    assert loaded.title == "renamed \ufffd"
    assert reply.content == "half \udfff and the rest"  # the caller's message is not changed
    # Searching is made storable the same way, so it finds what was saved.
    assert [s.title for s in db.list_conversations("\ud800")] == ["renamed \ufffd"]


# -- importing: the whole file checked before anything is made of it --------------------------


def exported() -> dict[str, object]:
    c = Conversation(title="Greeting")
    c.add("user", "hello")
    c.add("assistant", "hi there")
    c.add("user", "and now?")
    c.add("assistant", "still here")
    document: dict[str, object] = json.loads(to_json(c))
    return document


def test_an_import_with_escaped_surrogates_is_stored_and_says_so(db: Database) -> None:
    document = exported()
    messages = document["messages"]
    assert isinstance(messages, list)
    messages[1]["content"] = "broken \ud800 reply"
    document["title"] = "title \udc00"
    text = json.dumps(document)  # ensure_ascii: the file holds the escape \ud800
    assert "\\ud800" in text
    imported, replaced = read_json(text)
    assert replaced
    assert imported.title == "title \ufffd"
    db.save_all(imported)
    loaded = db.load(imported.id)
    assert loaded is not None
    assert [m.content for m in loaded.messages][1] == "broken \ufffd reply"
    _, clean = read_json(to_json(loaded))
    assert not clean


def test_exports_of_unsaved_text_are_writable() -> None:
    c = Conversation()
    c.add("user", "typed \ud800 somewhere")
    for text in (to_json(c), to_markdown(c)):
        text.encode("utf-8")
        assert "typed \ufffd somewhere" in text


def broken(change: str) -> str:
    document = exported()
    messages = document["messages"]
    assert isinstance(messages, list)
    last = messages[-1]
    if change == "content is a number":
        last["content"] = 42
    elif change == "duplicate id":
        last["id"] = messages[0]["id"]
    elif change == "unknown parent":
        last["parent_id"] = "nowhere"
    elif change == "a loop":
        messages[0]["parent_id"] = last["id"]
    elif change == "unknown leaf":
        document["leaf_id"] = "nowhere"
    elif change == "time is text":
        last["created_at"] = "yesterday"
    elif change == "huge time":
        return json.dumps(document).replace('"created_at": ', '"created_at": 1' + "0" * 400, 1)
    elif change == "a message is a list":
        messages[2] = ["not", "a", "message"]
    elif change == "unknown status":
        last["status"] = "exploded"
    elif change == "settings is a list":
        document["settings"] = [1]
    return json.dumps(document)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("content is a number", "in message 4, “content” is missing or has the wrong type"),
        ("duplicate id", "message 4 has the same id as an earlier one"),
        ("unknown parent", "message 4 follows a message that is not in the file"),
        ("a loop", "message 1 follows itself through the messages before it"),
        ("unknown leaf", "the message it shows (leaf_id) is not in the file"),
        ("time is text", "in message 4, “created_at” is missing or has the wrong type"),
        ("huge time", "“created_at” is missing or has the wrong type"),
        ("a message is a list", "message 3 is not an object"),
        ("unknown status", "message 4 has an unknown status (exploded)"),
        ("settings is a list", "“settings” is missing or has the wrong type"),
    ],
)
def test_a_file_bad_half_way_is_refused_with_a_reason(change: str, reason: str) -> None:
    with pytest.raises(NotAConversationError) as refused:
        read_json(broken(change))
    assert str(refused.value) == reason
    assert refused.value.sentence.template  # translatable, with its fields apart


def test_the_untouched_file_imports(db: Database) -> None:
    imported, replaced = read_json(json.dumps(exported()))
    assert not replaced
    assert [m.content for m in imported.messages] == ["hello", "hi there", "and now?", "still here"]


def test_deeply_nested_json_is_refused_not_crashed() -> None:
    with pytest.raises(NotAConversationError):
        read_json("[" * 100_000 + "]" * 100_000)
