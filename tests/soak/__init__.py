"""Tests of ``app/soak/``."""
