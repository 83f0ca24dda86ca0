"""Tests of ``app/store/``."""
