"""Tests of ``app/documents/``."""
