"""The self-test's child: load a model, process a few hundred prompt tokens, decode a few.

Run in a process of its own by :mod:`app.install.self_test` (``floodgate --self-test`` and the
end of setup), because what it checks for is a native crash: a llama.cpp built with
instruction sets the CPU lacks (SIGILL) or with kernels that crash on it (ggml's AMX
segfaults on every batch of two tokens or more). It goes through Floodgate's own engine, in
the app's own thread setup, so it exercises what a first prompt does.

Each step is announced on stdout before it starts (``step <name>``), so a parent that sees
the child die knows what it was doing; the last line is ``ok ...`` with the figures.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

PROMPT_TOKENS = 300
"""About this many prompt tokens: several multi-token batches, as a first prompt has."""

DECODE_TOKENS = 8


def _say(line: str) -> None:
    print(line, flush=True)


def run(model: Path) -> int:
    """Check the engine on ``model``; a native crash kills this process (that is the point)."""
    _say("step importing llama.cpp")
    import llama_cpp

    from app.engine import (
        EngineOptions,
        GenerationReport,
        GenerationSettings,
        ModelLoadError,
        StopSignal,
    )
    from app.engine.llama import open_llama

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    _say(f"system-info {info}")
    _say("step loading the model")
    started = time.perf_counter()
    # No prompt cache: the test must compute, not restore. Chunks of n_batch tokens.
    options = EngineOptions(n_ctx=1024, cache_ram_mb=0, cache_dir=None, prefill_chunk_seconds=0)
    try:
        backend = open_llama(model, options)
    except ModelLoadError as exc:
        _say(f"error {exc.sentence}")
        return 1
    loaded = time.perf_counter() - started
    sentence = "The quick brown fox jumps over the lazy dog while the river runs to the sea. "
    text = sentence * (PROMPT_TOKENS // max(1, backend.count_tokens(sentence)) + 1)
    report = GenerationReport()
    settings = GenerationSettings(temperature=0.0, max_tokens=DECODE_TOKENS)
    _say(f"step processing a prompt of {backend.count_tokens(text)} tokens")
    started = time.perf_counter()
    stream = backend.stream_reply(
        [{"role": "user", "content": text}], settings, StopSignal(), report, conversation=""
    )
    pieces = 0
    first_at = 0.0
    for _piece in stream:
        if pieces == 0:
            first_at = time.perf_counter()
            _say("step decoding")
        pieces += 1
    ended = time.perf_counter()
    backend.close()
    if report.error is not None:
        _say(f"error {report.error}")
        return 1
    placement = backend.info.placement
    where = (
        f"{placement.device}:{placement.layers}/{placement.all_layers}"
        if placement is not None and placement.on_gpu
        else "cpu"
    )
    _say(
        f"ok on={where} loaded={loaded:.2f}s prompt_tokens={report.prompt_tokens} "
        f"prompt_seconds={(first_at or ended) - started:.2f} pieces={pieces} "
        f"decode_seconds={ended - (first_at or ended):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(run(Path(sys.argv[1])))
