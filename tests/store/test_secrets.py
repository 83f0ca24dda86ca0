"""API keys go to the system keyring, or nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import keyring

from app.store.preferences import (
    REMOTES_KEPT,
    KnownRemote,
    Preferences,
    load_preferences,
    preferences_path,
    save_preferences,
)
from app.store.secrets import SERVICE, load_api_key, save_api_key
from tests.support.keyring import MemoryKeyring


def test_a_key_is_kept_in_the_keyring_and_forgotten_when_emptied(
    memory_keyring: MemoryKeyring,
) -> None:
    assert save_api_key("http://server/v1", "sk-secret")
    assert memory_keyring.kept == {(SERVICE, "http://server/v1"): "sk-secret"}
    assert load_api_key("http://server/v1") == "sk-secret"
    assert save_api_key("http://server/v1", "")
    assert load_api_key("http://server/v1") is None
    assert save_api_key("http://never-set/v1", "")  # forgetting nothing is fine


def test_without_a_keyring_nothing_is_stored_anywhere(floodgate_home: object) -> None:
    from keyring.backends.fail import Keyring as NoKeyring

    before = keyring.get_keyring()
    keyring.set_keyring(NoKeyring())
    try:
        assert not save_api_key("http://server/v1", "sk-secret")
        assert load_api_key("http://server/v1") is None
    finally:
        keyring.set_keyring(before)
    save_preferences(Preferences(remotes=[KnownRemote("http://server/v1", "m")]))
    assert load_preferences().remotes == [KnownRemote("http://server/v1", "m")]
    text = (floodgate_home / "preferences.json").read_text()  # type: ignore[operator]
    assert "sk-secret" not in text


def test_servers_are_remembered_most_recent_first_and_an_older_file_is_read(
    floodgate_home: Path,
) -> None:
    preferences = Preferences()
    preferences.remember_remote("http://a/v1", "m1")
    preferences.remember_remote("http://b/v1", "m2")
    preferences.remember_remote("http://a/v1", "m3")  # another model on the same server
    preferences.remember_remote("http://b/v1", "m2")  # again: it moves first, not twice
    assert preferences.remotes == [
        KnownRemote("http://b/v1", "m2"),
        KnownRemote("http://a/v1", "m3"),
        KnownRemote("http://a/v1", "m1"),
    ]
    assert preferences.last_remote == KnownRemote("http://b/v1", "m2")
    for i in range(REMOTES_KEPT + 3):
        preferences.remember_remote(f"http://host-{i}/v1", "m")
    assert len(preferences.remotes) == REMOTES_KEPT
    assert preferences.remotes[0] == KnownRemote(f"http://host-{REMOTES_KEPT + 2}/v1", "m")
    save_preferences(preferences)
    assert load_preferences().remotes == preferences.remotes
    # A file written before the list kept the last server in two fields: it is read as one.
    preferences_path().write_text(
        json.dumps({"server_url": "http://old/v1", "server_model": "m", "theme": "dark"})
    )
    assert load_preferences().remotes == [KnownRemote("http://old/v1", "m")]
    preferences_path().write_text(json.dumps({"servers": [{"url": "http://x/v1"}, 7, None]}))
    assert load_preferences().remotes == []  # what is incomplete is left out
