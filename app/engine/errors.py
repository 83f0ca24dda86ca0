"""Errors the engine reports, worded for the person using the app."""


class ModelLoadError(Exception):
    """A model file could not be opened. ``str(error)`` is a sentence for the user."""
