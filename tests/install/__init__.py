"""Tests of ``app/install/``."""
