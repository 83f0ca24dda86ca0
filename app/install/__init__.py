"""Setting Floodgate up on a machine: the llama.cpp build and the check that it runs.

Stdlib only: :mod:`app.install.llama_wheel` runs before Floodgate's dependencies are installed.
"""
