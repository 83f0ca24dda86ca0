"""Conversations and their persistence. No Qt here."""
