"""A keyring in memory, in place of the desktop's, and the fixture that installs it.

The ``memory_keyring`` fixture is registered for every test in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class MemoryKeyring(KeyringBackend):
    """A keyring that keeps passwords in a dict (what the desktop's would do, in a test)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.kept.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.kept[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.kept:
            raise PasswordDeleteError(username)
        del self.kept[(service, username)]


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    """A :class:`MemoryKeyring` as the keyring for the test; the one before comes back after."""
    before = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(before)
