"""Widgets: they render the session's state and forward the user's intent, nothing more."""
