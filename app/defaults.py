"""The default of every setting, defined once.

The engine's options (:class:`~app.engine.backend.EngineOptions`,
:class:`~app.engine.backend.GenerationSettings`) and the settings the user keeps
(:class:`~app.store.settings.Settings`) both read their defaults here: the engine and the store
may not import each other, and two copies of a default drift apart.
"""

from __future__ import annotations

# Sampling.
TEMPERATURE = 0.7
TOP_P = 0.95
TOP_K = 40
MIN_P = 0.05
REPEAT_PENALTY = 1.1
MAX_TOKENS = 2048
SEED: int | None = None

# Loading.
N_CTX = 4096
N_BATCH = 512

# The GPU (see app/engine/placement.py).
COMPUTE = "auto"
"""Where models run: ``auto`` (the GPU with the most free memory, if there is one), ``cpu``, or
one GPU by ggml's name for it (``Vulkan0``, ``CUDA1``)."""
GPU_LAYERS: int | None = None
"""Layers offloaded to the GPU: None fits as many as its free memory holds."""
GPU_MEMORY_MB = 0
"""The most GPU memory a model may take, in MB: 0 takes what is free, less a margin."""

# Replies side by side (see app/engine/batch.py).
PARALLEL = 0
"""Replies the model writes at once (the window's and the API's), each with a KV cache of the
whole context: 0 chooses from the memory there is (app/engine/fit.py's ``choose_parallel``).
The app's setting; :class:`~app.engine.backend.EngineOptions` itself decodes one at a time
unless told otherwise, so the tests, the bench and the self-test compare single replies."""
PARALLEL_MAX = 8
"""The most replies side by side the Settings dialog offers (``--parallel`` takes more)."""

# Speculative decoding (see app/engine/draft.py).
PROMPT_LOOKUP = False
"""Guess ahead from the conversation (prompt lookup): off, because on a CPU llama.cpp computes
a token checked within a call of several in another order than the same token alone, so a
reply with guesses can differ in a word from the one without (README, ``speculative``)."""

# The prompt cache: processed prompts kept per conversation (KV cache states).
CACHE_RAM_MB = 1024
"""A gigabyte of RAM: about 40 conversations of 1,200 tokens with a 135M model, or 8 with an
8B one (about 130 KB a token); little enough to leave a 16 GB machine usable."""
CACHE_DISK_MB = 4096

# The flow.
QUEUE_BOUND = 64
"""Pieces the queue holds before the worker waits: about a second of a fast model's output,
so a busy frame or two never pauses inference, while a stalled window pauses it quickly."""

# The local API server.
API_SERVER_HOST = "127.0.0.1"
API_SERVER_PORT = 8731
"""A port none of the well-known local servers uses (llama.cpp 8080, Ollama 11434, LM Studio
1234, Jan 1337, GPT4All 4891, llama-cpp-python and vLLM 8000, KoboldCpp 5001,
text-generation-webui 5000 and 7860)."""
API_SERVER_MAX_WAITING = 16
"""Requests that may wait for the model at once; one more gets 503 with ``Retry-After``."""


# Threads (0: chosen by Floodgate; see app/engine/threads.py).
DECODE_THREADS = 0
"""Threads that decode a reply: 0 measures the fastest count on this machine, per model."""
PROMPT_THREADS = 0
"""Threads that process a prompt: 0 uses every physical core (prompt processing is
compute-bound: two cores process a prompt 1.84 times as fast as one)."""
