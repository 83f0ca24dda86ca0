"""Tests of ``app/downloads/``."""
