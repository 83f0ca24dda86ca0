"""The flow from the worker thread to the window: queue, frame pump, metrics, session.

QtCore only: no widgets, so all of it is testable without a window.
"""
