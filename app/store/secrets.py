"""API keys in the system keyring (Secret Service, Keychain, Windows Credential Locker).

Never in Floodgate's own files or logs. Where there is no keyring, nothing is stored and the
caller keeps the key in memory for the session. These calls can wait on the desktop's keyring
service, so they run off the UI thread.
"""

from __future__ import annotations

import contextlib
import logging

import keyring
from keyring.errors import KeyringError, PasswordDeleteError

log = logging.getLogger(__name__)

SERVICE = "Floodgate"


def save_api_key(url: str, key: str) -> bool:
    """Keep ``key`` for the server at ``url`` (an empty key forgets it).

    Returns:
        Whether a keyring took it.
    """
    try:
        if key:
            keyring.set_password(SERVICE, url, key)
        else:
            with contextlib.suppress(PasswordDeleteError):  # there was none
                keyring.delete_password(SERVICE, url)
    except (KeyringError, RuntimeError) as exc:
        log.info("No keyring for the API key of %s: %s", url, type(exc).__name__)
        return False
    return True


def load_api_key(url: str) -> str | None:
    """The key kept for the server at ``url``, if a keyring has one."""
    try:
        return keyring.get_password(SERVICE, url)
    except (KeyringError, RuntimeError) as exc:
        log.info("No keyring for the API key of %s: %s", url, type(exc).__name__)
        return None
