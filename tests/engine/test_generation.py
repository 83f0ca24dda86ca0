"""Floodgate's decode loop: same replies as llama-cpp-python, stop strings, UTF-8, sampling."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

from app.engine import ChatMessage, EngineOptions, GenerationReport, GenerationSettings, StopSignal
from app.engine.generation import SamplerChain, StopStrings, new_text_decoder
from app.engine.llama import LlamaBackend, open_llama

GREEDY = GenerationSettings(temperature=0.0, max_tokens=64)
SEEDED = GenerationSettings(temperature=0.8, seed=1234, max_tokens=48)

PROMPTS: dict[str, list[ChatMessage]] = {
    "english": [{"role": "user", "content": "Explain in two sentences why the sky is blue."}],
    "chinese": [{"role": "user", "content": "请用中文写一首关于月亮的短诗。"}],
    "emoji": [{"role": "user", "content": "Describe a party using only emoji 🎉🥳🎂"}],
    "code": [{"role": "user", "content": "Write a C function that sums an array of ints."}],
    "multi-turn": [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "I have a cat called Tom."},
        {"role": "assistant", "content": "Tom is a nice name for a cat."},
        {"role": "user", "content": "What is my cat called?"},
    ],
}


# --------------------------------------------------------------------- without the model


def feed_all(stops: StopStrings, pieces: list[str]) -> str:
    shown = [stops.feed(p) for p in pieces]
    if not stops.hit:
        shown.append(stops.flush())
    return "".join(shown)


def test_stop_string_split_across_pieces_is_never_shown() -> None:
    stops = StopStrings(["<|im_end|>"])
    shown = [stops.feed(p) for p in ["Hello", " world<", "|im_", "end|>", "after"]]
    assert shown[:2] == ["Hello", " world"]  # "<" held back: it may begin the stop string
    assert "".join(shown) == "Hello world"
    assert stops.hit


def test_text_held_back_is_released_when_it_is_not_a_stop_string() -> None:
    stops = StopStrings(["<|im_end|>"])
    assert stops.feed("a <|im") == "a "
    assert stops.feed("ported") == "<|imported"
    assert not stops.hit
    assert feed_all(StopStrings(["STOP"]), ["x S", "T"]) == "x ST"  # the end releases it


def test_the_earliest_of_several_stop_strings_wins() -> None:
    assert feed_all(StopStrings(["</s>", "User:"]), ["ok User: hi </s>"]) == "ok "
    assert feed_all(StopStrings(["</s>", "User:"]), ["ok </", "s> User:"]) == "ok "


def test_without_stop_strings_text_passes_through() -> None:
    stops = StopStrings(["", ""])
    assert stops.feed("<|im_end|>") == "<|im_end|>"
    assert not stops.hit


def test_a_character_split_across_tokens_waits_for_its_last_byte() -> None:
    decode = new_text_decoder().decode
    dragon = "🐉".encode()
    zhong = "中".encode()
    assert decode(dragon[:1]) == ""
    assert decode(dragon[1:3]) == ""
    assert decode(dragon[3:] + zhong[:2]) == "🐉"
    assert decode(zhong[2:]) == "中"


def test_bytes_that_never_make_a_character_are_dropped_not_replaced() -> None:
    decode = new_text_decoder().decode
    assert decode(b"a\xffb") == "ab"
    assert decode("中".encode()[:2]) == ""
    assert decode(b"", True) == ""  # a character cut by the end of the reply is dropped


def test_sampler_chain_is_rebuilt_only_when_the_settings_change() -> None:
    chain = SamplerChain()
    try:
        first = chain.prepare(GREEDY)
        # the cut before the penalties, the penalties, greedy
        assert llama_cpp.llama_sampler_chain_n(first) == 3
        assert chain.prepare(GREEDY) is first  # reset, not rebuilt
        sampled = chain.prepare(SEEDED)
        # the cut, penalties, top k, top p, min p, temperature, distribution
        assert llama_cpp.llama_sampler_chain_n(sampled) == 7
    finally:
        chain.close()


# --------------------------------------------------------------------- with the model


@pytest.fixture(scope="module")
def backend(model_path: Path) -> Iterator[LlamaBackend]:
    opened = open_llama(model_path, EngineOptions(n_threads=1, cache_ram_mb=0))
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def reference(model_path: Path) -> Iterator[llama_cpp.Llama]:
    """llama-cpp-python's own high-level API on the same model, for the same answers."""
    llm = llama_cpp.Llama(
        model_path=str(model_path), n_ctx=4096, n_threads=1, n_threads_batch=1, verbose=False
    )
    yield llm
    llm.close()


def reply(
    backend: LlamaBackend, messages: list[ChatMessage], settings: GenerationSettings
) -> tuple[list[str], GenerationReport]:
    report = GenerationReport()
    pieces = list(backend.stream_reply(messages, settings, StopSignal(), report))
    return pieces, report


def reference_reply(
    llm: llama_cpp.Llama, messages: list[ChatMessage], settings: GenerationSettings
) -> str:
    chunks: Iterator[Any] = llm.create_chat_completion(  # type: ignore[assignment]
        messages=list(messages),  # type: ignore[arg-type]
        stream=True,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        min_p=settings.min_p,
        repeat_penalty=settings.repeat_penalty,
        max_tokens=settings.max_tokens,
        seed=settings.seed,
    )
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


@pytest.mark.model
@pytest.mark.parametrize("name", list(PROMPTS))
def test_greedy_reply_is_llama_cpp_pythons(
    backend: LlamaBackend, reference: llama_cpp.Llama, name: str
) -> None:
    messages = PROMPTS[name]
    pieces, report = reply(backend, messages, GREEDY)
    text = "".join(pieces)
    assert text == reference_reply(reference, messages, GREEDY)
    assert len(pieces) > 3
    assert "\ufffd" not in text
    assert report.finish in ("done", "length")
    assert report.python_ms_per_token > 0


@pytest.mark.model
@pytest.mark.parametrize("name", ["english", "chinese"])
def test_seeded_reply_is_reproducible_and_llama_cpp_pythons(
    backend: LlamaBackend, reference: llama_cpp.Llama, name: str
) -> None:
    messages = PROMPTS[name]
    first = "".join(reply(backend, messages, SEEDED)[0])
    assert "".join(reply(backend, messages, SEEDED)[0]) == first
    other = GenerationSettings(temperature=0.8, seed=99, max_tokens=48)
    assert "".join(reply(backend, messages, other)[0]) != first  # the seed matters
    assert first == reference_reply(reference, messages, SEEDED)


@pytest.mark.model
def test_max_tokens_ends_with_length(backend: LlamaBackend) -> None:
    settings = GenerationSettings(temperature=0.0, max_tokens=5)
    pieces, report = reply(backend, PROMPTS["english"], settings)
    assert report.finish == "length"
    assert 1 <= len(pieces) <= 5


@pytest.mark.model
def test_stop_string_ends_the_reply_before_it(
    backend: LlamaBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = PROMPTS["english"]
    full = "".join(reply(backend, messages, GREEDY)[0])
    word = "blue"
    assert word in full
    render = backend._prompt.render

    def with_stop_word(*args: Any) -> tuple[str, tuple[str, ...], bool]:
        text, stops, add_bos = render(*args)
        return text, (*stops, word), add_bos

    monkeypatch.setattr(backend._prompt, "render", with_stop_word)
    pieces, report = reply(backend, messages, GREEDY)
    assert "".join(pieces) == full[: full.index(word)]
    assert report.finish == "done"
