"""Floodgate: a desktop chat app for local language models."""
