"""Tests of ``app/flow/``."""
