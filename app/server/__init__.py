"""Floodgate as a local server: an OpenAI-compatible API over the open model.

A face of the flow, as the window is: it imports the flow and below, never the window, and
the window does not import it (an import-linter contract); the composition root wires the two.
Requests wait in the same FIFO queue as the window's replies for the one worker that owns the
model, and a client that leaves stops its computation through the same native abort as Stop.
"""
