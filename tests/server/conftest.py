"""Fixtures the API server's tests share."""

from tests.support.serving import client  # noqa: F401 (a fixture: asks each module's `served`)
