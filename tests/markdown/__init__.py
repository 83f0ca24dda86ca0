"""Tests of ``app/markdown/``."""
