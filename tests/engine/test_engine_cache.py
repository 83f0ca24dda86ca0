"""The engine's KV cache: prefix reuse, prompt cache, Stop and resume, progress, context shift.

Every way of obtaining a prompt's prefix must give the same greedy reply as processing the
whole prompt on a fresh context (issue 11, "Correct").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

from app.engine import ChatMessage, EngineOptions, GenerationReport, GenerationSettings, StopSignal
from app.engine.llama import LlamaBackend, open_llama
from app.engine.prompt_cache import ModelIdentity, PromptCache
from app.trace import TRACE

pytestmark = pytest.mark.model

GREEDY = GenerationSettings(temperature=0.0, max_tokens=24)
SYSTEM: ChatMessage = {"role": "system", "content": "You are a careful assistant."}
FACTS = " ".join(
    f"Station {i} sits {i * 3} km north of the river and keeps {i % 7 + 2} boats."
    for i in range(1, 16)
)  # about 300 tokens
LONG_FACTS = " ".join(
    f"Warehouse {i} stores {i * 11} crates of {('tea', 'rice', 'salt', 'wool')[i % 4]}."
    for i in range(1, 61)
)  # about 800 tokens


def conversation_a() -> list[ChatMessage]:
    return [SYSTEM, {"role": "user", "content": FACTS + "\nWhich station keeps most boats?"}]


def conversation_b() -> list[ChatMessage]:
    return [SYSTEM, {"role": "user", "content": "Name three colours of the rainbow."}]


def follow_up(history: list[ChatMessage], answer: str, question: str) -> list[ChatMessage]:
    return [
        *history,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": question},
    ]


class RecordingReport(GenerationReport):
    """A report that remembers every prefill_done the engine wrote, and can act on it."""

    def __init__(self) -> None:
        super().__init__()
        self.progress: list[int] = []
        self.on_progress: Any = None

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name == "prefill_done" and "progress" in self.__dict__:
            self.progress.append(int(value))  # type: ignore[call-overload]
            if self.on_progress is not None:
                self.on_progress(self)


def reply(
    backend: LlamaBackend,
    messages: list[ChatMessage],
    conversation: str = "",
    stop: StopSignal | None = None,
    report: GenerationReport | None = None,
    settings: GenerationSettings = GREEDY,
) -> tuple[str, GenerationReport]:
    report = report or GenerationReport()
    pieces = backend.stream_reply(
        messages, settings, stop or StopSignal(), report, conversation=conversation
    )
    return "".join(pieces), report


@pytest.fixture(scope="module")
def fresh(model_path: Path) -> Iterator[LlamaBackend]:
    """Full processing on an empty context, every time: the reference replies."""
    opened = open_llama(model_path, EngineOptions(n_threads=1, cache_ram_mb=0))
    yield opened
    opened.close()


def fresh_reply(fresh: LlamaBackend, messages: list[ChatMessage]) -> str:
    fresh.sequence.clear()
    text, report = reply(fresh, messages)
    assert report.cached_tokens == 0
    return text


@pytest.fixture
def backend(model_path: Path, tmp_path: Path) -> Iterator[LlamaBackend]:
    """The exact mode (a reply processed again with the next prompt): this file's tests compare
    with a fresh context; the default mode is checked against the kept state below."""
    opened = open_llama(
        model_path,
        EngineOptions(n_threads=1, cache_dir=tmp_path / "prompt-cache", reuse_reply_tokens=False),
    )
    yield opened
    opened.close()


def test_prompt_is_processed_in_chunks_with_progress(backend: LlamaBackend) -> None:
    report = RecordingReport()
    reply(backend, conversation_a(), "a", report=report)
    total = report.prompt_tokens
    assert total > 250
    assert report.progress[0] == 0
    assert report.progress[-1] == total
    assert len(report.progress) >= 4  # several chunks, each reported
    assert report.progress == sorted(report.progress)
    assert report.prefill_started_at is not None
    assert report.prefill_ended_at is not None
    assert report.prefill_ended_at > report.prefill_started_at
    assert (report.cached_tokens, report.prefix_source) == (0, "")


def test_unchunked_prefill_gives_the_same_reply(model_path: Path, fresh: LlamaBackend) -> None:
    whole = open_llama(
        model_path, EngineOptions(n_threads=1, cache_ram_mb=0, prefill_chunk_seconds=0)
    )
    try:
        report = RecordingReport()
        text, _ = reply(whole, conversation_a(), report=report)
    finally:
        whole.close()
    assert report.progress == [0, report.prompt_tokens]  # one call of n_batch (512) tokens
    assert text == fresh_reply(fresh, conversation_a())


def test_follow_up_reuses_the_prefix_in_place(backend: LlamaBackend, fresh: LlamaBackend) -> None:
    first, _ = reply(backend, conversation_a(), "a")
    second = follow_up(conversation_a(), first, "And which keeps fewest?")
    text, report = reply(backend, second, "a")
    assert report.prefix_source == "kept"
    assert report.cached_tokens > 250
    assert report.prompt_tokens - report.cached_tokens < 60  # only the new turn was processed
    assert text == fresh_reply(fresh, second)


def test_switching_back_restores_from_memory(backend: LlamaBackend, fresh: LlamaBackend) -> None:
    first, _ = reply(backend, conversation_a(), "a")
    reply(backend, conversation_b(), "b")
    second = follow_up(conversation_a(), first, "And which keeps fewest?")
    text, report = reply(backend, second, "a")
    assert report.prefix_source == "memory"
    assert report.cached_tokens > 250
    assert report.saved_seconds > 0
    assert text == fresh_reply(fresh, second)
    stats = backend.cache_stats()
    assert stats is not None
    assert stats.hits >= 1


def open_with_disk_cache(model_path: Path, folder: Path, *, exact: bool = True) -> LlamaBackend:
    """An engine whose cache writes every kept prompt to disk, however cheap it was."""
    options = EngineOptions(n_threads=1, cache_dir=folder, reuse_reply_tokens=not exact)
    llm = llama_cpp.Llama(
        model_path=str(model_path),
        n_ctx=options.n_ctx,
        n_threads=1,
        n_threads_batch=1,
        verbose=False,
    )
    cache = PromptCache(
        ModelIdentity.of(model_path, llm.n_ctx()),
        ram_budget=options.cache_ram_mb * 2**20,
        disk_dir=folder,
        disk_budget=options.cache_disk_mb * 2**20,
        disk_min_seconds=0.0,
    )
    return LlamaBackend(llm, model_path, options, cache)


def test_a_new_engine_restores_from_disk(
    model_path: Path, tmp_path: Path, fresh: LlamaBackend
) -> None:
    folder = tmp_path / "prompt-cache"
    before = open_with_disk_cache(model_path, folder)
    try:
        first, _ = reply(before, conversation_a(), "a")
        reply(before, conversation_b(), "b")  # a is kept, and written to disk
    finally:
        before.close()  # waits for the writes in flight
    assert list(folder.glob("*.fgkv"))  # a, at least
    second = follow_up(conversation_a(), first, "And which keeps fewest?")
    after = open_with_disk_cache(model_path, folder)
    try:
        text, report = reply(after, second, "a")
    finally:
        after.close()
    assert report.prefix_source == "disk"
    assert report.cached_tokens > 250
    assert text == fresh_reply(fresh, second)


def test_stop_mid_prompt_keeps_what_was_processed(
    backend: LlamaBackend, fresh: LlamaBackend
) -> None:
    messages: list[ChatMessage] = [
        SYSTEM,
        {"role": "user", "content": LONG_FACTS + "\nWhich warehouse stores wool?"},
    ]
    stop = StopSignal()
    report = RecordingReport()

    def stop_soon(current: RecordingReport) -> None:
        if len(current.progress) == 3:  # two chunks in: Stop lands inside the third
            threading.Timer(0.05, stop.set).start()

    report.on_progress = stop_soon
    text, _ = reply(backend, messages, "w", stop=stop, report=report)
    assert (text, report.finish) == ("", "stopped")
    kept = len(backend.sequence.tokens)
    total = report.prompt_tokens
    assert 0 < kept < total
    memory = llama_cpp.llama_get_memory(backend._ctx)
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) + 1 == kept
    assert report.prefill_ended_at is None
    again, resumed = reply(backend, messages, "w")
    assert (resumed.cached_tokens, resumed.prefix_source) == (kept, "kept")
    assert again == fresh_reply(fresh, messages)


def test_stop_mid_reply_then_follow_up(backend: LlamaBackend, fresh: LlamaBackend) -> None:
    stop = StopSignal()
    report = GenerationReport()
    pieces: list[str] = []
    settings = GenerationSettings(temperature=0.0, max_tokens=200)
    for piece in backend.stream_reply(conversation_a(), settings, stop, report, conversation="a"):
        pieces.append(piece)
        if len(pieces) == 6:
            threading.Timer(0.01, stop.set).start()
    assert report.finish == "stopped"
    second = follow_up(conversation_a(), "".join(pieces), "Go on.")
    text, resumed = reply(backend, second, "a")
    assert resumed.cached_tokens > 250
    assert text == fresh_reply(fresh, second)


def test_llama_cpp_python_using_the_context_is_noticed(
    backend: LlamaBackend, fresh: LlamaBackend
) -> None:
    reply(backend, conversation_a(), "a")
    # llama-cpp-python's own API on the same context (nothing in the app does this today).
    list(backend._llm.create_chat_completion(conversation_b(), max_tokens=8, stream=True))  # type: ignore[arg-type]
    text, report = reply(backend, conversation_a(), "a")
    assert report.prefix_source in ("", "memory")  # not the KV record it overwrote
    assert text == fresh_reply(fresh, conversation_a())


def test_forget_and_clear_drop_kept_prompts(backend: LlamaBackend) -> None:
    reply(backend, conversation_a(), "a")
    reply(backend, conversation_b(), "b")
    stats = backend.cache_stats()
    assert stats is not None
    # a was kept when b took the context; b itself is kept at the end of its reply only if
    # it took long enough to compute (a busy machine), so it may be there too.
    kept = stats.entries
    assert kept in (1, 2)
    backend.forget("a")
    stats = backend.cache_stats()
    assert stats is not None
    assert stats.entries == kept - 1
    reply(backend, conversation_a(), "a")  # b kept now
    backend.clear_cache()
    stats = backend.cache_stats()
    assert stats is not None
    assert (stats.entries, stats.disk_entries) == (0, 0)


def test_oldest_turns_left_out_are_shifted_not_processed_again(backend: LlamaBackend) -> None:
    turns: list[ChatMessage] = [SYSTEM]
    for i in range(6):
        turns.append({"role": "user", "content": f"Question {i}: " + FACTS[i * 60 : i * 60 + 300]})
        turns.append({"role": "assistant", "content": f"Answer {i}: noted, station {i}."})
    turns.append({"role": "user", "content": "Which station did I ask about first?"})
    reply(backend, turns, "s")
    held = len(backend.sequence.tokens)
    # The worker leaves out the oldest question and its answer when the context is full.
    kept = [turns[0], *turns[3:]]
    report = GenerationReport(dropped_turns=2)
    text, report = reply(backend, kept, "s", report=report)
    assert report.prefix_source == "shift"
    assert report.prompt_tokens - report.cached_tokens < 40
    assert report.cached_tokens < held
    assert report.finish in ("done", "length")
    assert text.strip()
    memory = llama_cpp.llama_get_memory(backend._ctx)
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) + 1 == len(backend.sequence.tokens)
    # Not bit-identical to processing ``kept`` afresh: the kept turns were computed while the
    # dropped ones were there (which is what every context shift trades for the time).


def test_trace_has_a_span_per_prompt_chunk_and_per_token(
    backend: LlamaBackend, tmp_path: Path
) -> None:
    path = tmp_path / "trace.json"
    TRACE.start(path)
    try:
        report = RecordingReport()
        reply(backend, conversation_a(), "a", report=report)
    finally:
        TRACE.stop()
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    names = [event["name"] for event in events if event.get("ph") == "X"]
    assert names.count("prefill chunk") == len(report.progress) - 1
    assert names.count("decode token") == report.pieces - 1  # the last token is not decoded


def test_regenerating_the_same_prompt_gives_the_same_reply(
    backend: LlamaBackend, fresh: LlamaBackend
) -> None:
    first, _ = reply(backend, conversation_a(), "a")
    again, report = reply(backend, conversation_a(), "a")  # Regenerate: the same prompt
    assert (report.prefix_source, report.prompt_tokens - report.cached_tokens) == ("kept", 2)
    assert again == first == fresh_reply(fresh, conversation_a())


def test_with_replies_kept_a_restored_state_gives_what_the_kept_one_gives(
    model_path: Path, tmp_path: Path
) -> None:
    # The default mode keeps a reply's tokens as they were computed (one at a time): a state
    # restored from memory or disk must give exactly what that kept state gives in place.
    second: list[ChatMessage] = []
    answers: dict[str, str] = {}
    for where in ("kept", "memory", "disk"):
        engine = open_with_disk_cache(model_path, tmp_path / where, exact=False)
        try:
            if where == "disk":
                engine.close()  # written to disk by the "memory" engine's cache
                engine = open_with_disk_cache(model_path, tmp_path / "memory", exact=False)
            else:
                first, _ = reply(engine, conversation_a(), "a")
                second = follow_up(conversation_a(), first, "And which keeps fewest?")
                if where == "memory":
                    reply(engine, conversation_b(), "b")
            answers[where], report = reply(engine, second, "a")
            assert report.prefix_source == where
            assert report.prompt_tokens - report.cached_tokens < 20  # the reply was kept
        finally:
            engine.close()
    assert answers["memory"] == answers["kept"]
    assert answers["disk"] == answers["kept"]


@pytest.fixture
def exact(model_path: Path) -> Iterator[LlamaBackend]:
    """The exact mode: a reply's tokens are processed again with the next prompt."""
    opened = open_llama(
        model_path, EngineOptions(n_threads=1, cache_ram_mb=0, reuse_reply_tokens=False)
    )
    yield opened
    opened.close()


def test_a_follow_up_does_not_process_the_last_reply_again(
    model_path: Path, exact: LlamaBackend
) -> None:
    history: list[ChatMessage] = [SYSTEM, {"role": "user", "content": "Tell me about boats."}]
    settings = GenerationSettings(temperature=0.0, max_tokens=60)
    backend = open_llama(model_path, EngineOptions(n_threads=1, cache_ram_mb=0))  # the default
    for engine in (backend, exact):
        text, _ = reply(engine, history, "boats", settings=settings)
        replied = engine.count_tokens(text)
        _, report = reply(engine, follow_up(history, text, "Why?"), "boats", settings=settings)
        processed = report.prompt_tokens - report.cached_tokens
        assert report.prefix_source == "kept"
        if engine is backend:  # the default: only the question and the template's markers
            assert processed < 15 < replied
        else:
            assert processed > replied
    backend.close()


def test_each_follow_up_of_a_chat_equals_fresh_processing(
    exact: LlamaBackend, fresh: LlamaBackend
) -> None:
    # Kept in the KV cache, the reply's tokens (computed one at a time while replying) made
    # two of these three follow-ups differ from a fresh context: in the exact mode the engine
    # processes a reply again as part of the next prompt (EngineOptions.reuse_reply_tokens).
    backend = exact
    history: list[ChatMessage] = [SYSTEM, {"role": "user", "content": "Tell me about boats."}]
    settings = GenerationSettings(temperature=0.0, max_tokens=40)
    for question in ["Why?", "And rivers?", "Shorter please."]:
        text, report = reply(backend, history, "boats", settings=settings)
        fresh.sequence.clear()
        assert text == reply(fresh, history, settings=settings)[0]
        history = follow_up(history, text, question)
    assert report.cached_tokens > 60
