"""Tests of ``app/ui/``."""
