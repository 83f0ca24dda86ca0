"""Tests of ``app/engine/``."""
