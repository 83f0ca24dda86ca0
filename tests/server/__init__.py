"""Tests of ``app/server/``."""
