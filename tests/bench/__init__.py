"""Tests of ``app/bench/``."""
