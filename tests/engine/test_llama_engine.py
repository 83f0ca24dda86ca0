"""The llama.cpp engine on the real bundled model: streaming, Stop, chat template, UTF-8."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import pytest

from app.engine import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    StopSignal,
    kv_record,
)
from app.engine.llama import LlamaBackend, NativeAbortFlag, open_llama
from app.engine.sequence import KvSequence
from tests.support.batches import note_keeping

pytestmark = pytest.mark.model

GREEDY = GenerationSettings(temperature=0.0, max_tokens=48)
QUESTION: list[ChatMessage] = [{"role": "user", "content": "What is the capital of France?"}]
LONG_PROMPT = "The quick brown fox jumps over the lazy dog. " * 150  # about 1,500 tokens


@pytest.fixture(scope="module")
def backend(model_path: Path) -> Iterator[LlamaBackend]:
    opened = open_llama(model_path, EngineOptions(n_threads=2))
    yield opened
    opened.close()


def reply(
    backend: LlamaBackend,
    messages: list[ChatMessage],
    stop: StopSignal | None = None,
    settings: GenerationSettings = GREEDY,
) -> tuple[list[str], GenerationReport]:
    report = GenerationReport()
    pieces = list(backend.stream_reply(messages, settings, stop or StopSignal(), report))
    return pieces, report


def fresh_reply(model_path: Path, messages: list[ChatMessage]) -> str:
    fresh = open_llama(model_path, EngineOptions(n_threads=2))
    try:
        return "".join(reply(fresh, messages)[0])
    finally:
        fresh.close()


def test_native_flag_is_read_through_the_abort_callback_type() -> None:
    flag = NativeAbortFlag()
    assert flag.native  # x86-64 / arm64: no Python runs inside llama_decode

    def check() -> bool:  # as llama.cpp calls it: the callback with its data
        return bool(flag.callback(flag.data))

    assert check() is False
    flag.raise_flag()
    assert check() is True
    flag.lower()
    assert check() is False


def test_reply_streams_in_many_pieces(backend: LlamaBackend) -> None:
    pieces, report = reply(backend, QUESTION)
    assert report.finish in ("done", "length")
    assert len(pieces) > 5
    assert "France" in "".join(pieces)  # on topic (this tiny model does not say Paris)
    assert report.pieces == len(pieces)


def test_model_info_comes_from_the_gguf(backend: LlamaBackend, model_path: Path) -> None:
    info = backend.info
    assert info.has_chat_template
    assert info.path == model_path
    assert info.n_ctx == 4096
    # The GGUF's own template is used (directly, or as the known format it matches).
    assert info.chat_format in ("chatml", "chat_template.default")


def test_chat_template_renders_every_turn(backend: LlamaBackend, model_path: Path) -> None:
    handler = backend._llm._chat_handlers[
        "chat_template.default"
    ]  # what create_chat_completion uses
    assert handler is not None
    template = backend._llm.metadata["tokenizer.chat_template"]
    formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token="<|im_end|>", bos_token="<|im_start|>"
    )
    conversation: list[ChatMessage] = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "What is my name?"},
    ]
    prompt = formatter(messages=list(conversation)).prompt  # type: ignore[arg-type]
    assert prompt.index("<|im_start|>user\nMy name is Ada.") < prompt.index(
        "<|im_start|>assistant\nNice to meet you, Ada."
    )
    assert prompt.rstrip().endswith("<|im_start|>assistant")
    # Multi-turn through the engine equals a fresh context given the same history.
    assert "".join(reply(backend, conversation)[0]) == fresh_reply(model_path, conversation)


def test_stop_during_prefill_ends_the_computation(backend: LlamaBackend, model_path: Path) -> None:
    messages: list[ChatMessage] = [{"role": "user", "content": LONG_PROMPT}]
    assert len(backend.tokenize(LONG_PROMPT)) > 1400  # about 14 s of prefill here
    stop = StopSignal()
    threading.Timer(0.5, stop.set).start()
    pieces, report = reply(backend, messages, stop)
    assert report.finish == "stopped"
    assert pieces == []  # it never got past the prompt
    assert stop.set_at is not None
    assert report.compute_ended_at is not None
    # Prefill would take many seconds; Stop ended it (a loose bound: behaviour, not speed).
    assert report.compute_ended_at - stop.set_at < 1.0
    # And the model is still right afterwards.
    assert "".join(reply(backend, QUESTION)[0]) == fresh_reply(model_path, QUESTION)


def test_stop_during_decoding_then_next_reply_is_correct(
    backend: LlamaBackend, model_path: Path
) -> None:
    stop = StopSignal()
    report = GenerationReport()
    story: list[ChatMessage] = [{"role": "user", "content": "Write a long story about a dragon."}]
    pieces: list[str] = []
    settings = GenerationSettings(temperature=0.0, max_tokens=400)
    for piece in backend.stream_reply(story, settings, stop, report):
        pieces.append(piece)
        if len(pieces) == 10:
            # From another thread, as the window does, while the worker is inside llama_decode.
            threading.Timer(0.03, stop.set).start()
    assert report.finish == "stopped"
    assert 10 <= len(pieces) < 100
    assert "".join(reply(backend, QUESTION)[0]) == fresh_reply(model_path, QUESTION)


def test_stop_set_before_start_computes_nothing(backend: LlamaBackend) -> None:
    stop = StopSignal()
    stop.set()
    pieces, report = reply(backend, QUESTION, stop)
    assert (pieces, report.finish) == ([], "stopped")


@pytest.mark.parametrize(
    "prompt",
    ["请用中文介绍一下你自己。😀", "Reply with three emoji: 🐉🔥🌍", "日本語で挨拶してください。"],
)
def test_multibyte_text_streams_without_broken_characters(
    backend: LlamaBackend, prompt: str
) -> None:
    pieces, _ = reply(backend, [{"role": "user", "content": prompt}])
    text = "".join(pieces)
    assert "\ufffd" not in text
    assert all("\ufffd" not in p for p in pieces)
    # Each piece is whole text on its own: no piece starts or ends mid-character.
    for piece in pieces:
        assert piece.encode("utf-8").decode("utf-8") == piece


def test_some_reply_really_contains_multibyte_characters(backend: LlamaBackend) -> None:
    # Guards the test above against passing on an all-ASCII reply.
    pieces, _ = reply(backend, [{"role": "user", "content": "请用中文介绍一下你自己。😀"}])
    assert any(ord(ch) > 0x7F for ch in "".join(pieces))


def test_context_overflow_is_a_sentence(model_path: Path) -> None:
    small = open_llama(model_path, EngineOptions(n_ctx=256, n_threads=2))
    try:
        pieces, report = reply(small, [{"role": "user", "content": LONG_PROMPT}])
    finally:
        small.close()
    assert pieces == []
    assert report.finish == "error"
    assert "too long for this model's context of 256 tokens" in str(report.error)


def test_a_greedy_reply_does_not_depend_on_how_its_prompt_was_cut(model_path: Path) -> None:
    # The app's prompts go in chunks sized by the time they take, so they are cut elsewhere
    # from run to run. Without flash attention (as the app opens its contexts) every chunk
    # size gives the same bits; with it, llama.cpp's CPU attention sums a chunk of 64 tokens
    # or more in another order than a smaller one, and these replies differ (README,
    # "Drafts from the context").
    from app.bench.engine_drive import filler

    # n_batch chunks, against chunks of 1 ms: the smallest the sizer gives (8-16 tokens).
    whole, small = (
        open_llama(model_path, EngineOptions(cache_ram_mb=0, prefill_chunk_seconds=seconds))
        for seconds in (0.0, 0.001)
    )
    try:
        for seed, words in ((1, 120), (2, 260)):
            content = filler(seed, words) + "\nSummarise the text above."
            messages: list[ChatMessage] = [{"role": "user", "content": content}]
            in_one, one_report = reply(whole, messages)
            in_pieces, pieces_report = reply(small, messages)
            assert pieces_report.prompt_tokens == one_report.prompt_tokens > 150
            assert "".join(in_pieces) == "".join(in_one)
    finally:
        whole.close()
        small.close()


@pytest.mark.parametrize("how", ["stop", "worker_reads_no_further", "complete"])
def test_a_reply_ends_before_its_kv_state_is_kept(
    backend: LlamaBackend, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # Keeping the KV state for the prompt cache copies tens of MB (80 ms or more on a 2-core
    # VM): the reply's end, which Stop's latency is measured to and which ends the window's
    # queue (the report's on_end), comes before it.
    moments: list[str] = []
    note_keeping(backend, moments, monkeypatch)
    stop = StopSignal()
    report = GenerationReport(on_end=lambda: moments.append("end"))
    story: list[ChatMessage] = [{"role": "user", "content": "Write a long story about a dragon."}]
    settings = GenerationSettings(temperature=0.0, max_tokens=40 if how == "complete" else 400)
    stream = backend.stream_reply(story, settings, stop, report)
    for i, _ in enumerate(stream):
        if i == 5 and how == "stop":
            stop.set()
        if i == 5 and how == "worker_reads_no_further":
            stop.set()
            break  # as the worker does when the queue refuses a piece after Stop
    stream.close()
    assert moments == ["end", "keep the state"]
    assert report.finish == ("length" if how == "complete" else "stopped")
    assert report.compute_ended_at is not None


def test_a_state_that_cannot_be_kept_leaves_the_reply_as_it_ended(
    backend: LlamaBackend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The reply has ended (and its window shown it) before its KV state is kept for the
    # prompt cache: a copy that fails (memory, a full disk) is logged, not made the reply's;
    # nor is the previous conversation's, kept as this one takes its place.
    def copy_fails(*_args: object, **_kwargs: object) -> None:
        raise MemoryError("no room for the state")

    monkeypatch.setattr(kv_record, "read_sequence", copy_fails)
    monkeypatch.setattr(kv_record, "DISK_WORTHY_SECONDS", 0.0)  # kept however short
    report = GenerationReport()
    story: list[ChatMessage] = [{"role": "user", "content": "Write a long story about a dragon."}]
    settings = GenerationSettings(temperature=0.0, max_tokens=12)
    text = "".join(backend.stream_reply(story, settings, StopSignal(), report, conversation="k"))
    assert text
    assert report.finish == "length"
    assert report.error is None
    assert "could not be kept" in caplog.text
    again = GenerationReport()
    other: list[ChatMessage] = [{"role": "user", "content": "Name three colours."}]
    assert "".join(backend.stream_reply(other, settings, StopSignal(), again, conversation="o"))
    assert again.finish == "length"


def test_a_reply_whose_state_cannot_be_trimmed_ends_as_it_ended(
    backend: LlamaBackend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Where the reply's own tokens are not kept for the next prompt, they are trimmed off its
    # sequence after it ended. A trimming that fails is logged and the sequence dropped: the
    # reply stays as it ended, and the next one processes its prompt whole, with the same text
    # as a fresh engine gives.
    sequence = backend._kv.sequences[0]
    monkeypatch.setattr(backend._kv, "_reuse_reply_tokens", False)
    story: list[ChatMessage] = [{"role": "user", "content": "Write a long story about a dragon."}]
    settings = GenerationSettings(temperature=0.0, max_tokens=12)
    fresh = "".join(backend.stream_reply(QUESTION, settings, StopSignal(), GenerationReport()))
    real_trim = KvSequence.trim

    def trim_fails(self: KvSequence, n: int) -> None:
        if n < len(self.tokens):  # there is something to trim
            raise RuntimeError("the KV cache refused")

    sequence.clear()  # the story's prompt trims nothing: only the reply's end does
    monkeypatch.setattr(KvSequence, "trim", trim_fails)
    report = GenerationReport()
    text = "".join(backend.stream_reply(story, settings, StopSignal(), report, conversation="t"))
    assert text
    assert report.finish == "length"
    assert report.error is None
    assert "could not be trimmed" in caplog.text
    assert sequence.tokens == []
    monkeypatch.setattr(KvSequence, "trim", real_trim)
    again = GenerationReport()
    after = "".join(backend.stream_reply(QUESTION, settings, StopSignal(), again))
    assert again.finish == "length"
    assert again.cached_tokens == 0
    assert after == fresh
