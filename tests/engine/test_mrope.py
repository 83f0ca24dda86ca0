"""Pictures for a model whose positions are M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen 3.5).

Such a model places a picture's embeddings by row and column: all of them at one position,
and the next text that many positions on as the larger of the picture's columns and rows,
fewer than its embeddings. The engine keeps an id per embedding (the KV cache has a cell for
each) and gives llama.cpp the positions.

No such model ships in a package, so the test makes one: the bundled model's weights under
the ``qwen2vl`` architecture (:func:`tests.support.model_files.copy_as_mrope`), beside a
Qwen2-VL projector with random weights (:mod:`app.standins.projector`). What it says about a
picture means nothing; where its positions go is what libmtmd's own helper gives.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import pytest
from llama_cpp import mtmd_cpp as mtmd
from PIL import Image

from app.engine import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    StopSignal,
    kv_record,
    loading,
)
from app.engine.llama import LlamaBackend, open_llama
from app.engine.pictures import Picture, digest_of
from app.engine.sequence import KvSequence
from app.standins.projector import ProjectorShape, write_projector
from tests.support.batches import side_by_side
from tests.support.model_files import copy_as_mrope

pytestmark = pytest.mark.model

GREEDY = GenerationSettings(temperature=0.0, max_tokens=12, repeat_penalty=1.0)
FIRST_TOKEN = GenerationSettings(temperature=0.0, max_tokens=1, repeat_penalty=1.0)
SHAPE = ProjectorShape(kind="qwen2vl_merger", width=32, blocks=2, heads=2, patch_size=14)


@pytest.fixture(scope="module")
def files(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The M-RoPE model and its projector, written once for the module."""
    folder = tmp_path_factory.mktemp("mrope")
    model = copy_as_mrope(model_path, folder / "qwen2vl-test.gguf")
    return model, write_projector(folder / "mmproj-qwen2vl-test.gguf", SHAPE)


def picture(folder: Path, name: str = "wide.png", seed: int = 0) -> Picture:
    """A noisy picture of 6 x 3 cells of 28 px: 18 embeddings over 6 positions."""
    pixels = np.random.default_rng(seed).integers(0, 255, (84, 168, 3), dtype=np.uint8)
    path = folder / name
    Image.fromarray(pixels).save(path)
    return Picture(digest_of(path.read_bytes()), path)


def ask(p: Picture, text: str = "What is in this picture?") -> list[ChatMessage]:
    return [{"role": "user", "content": text, "pictures": (p,)}]


def follow_up(p: Picture, first: str) -> list[ChatMessage]:
    return [
        *ask(p),
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And its colours?"},
    ]


def reply(
    backend: LlamaBackend,
    messages: list[ChatMessage],
    stop: StopSignal | None = None,
    settings: GenerationSettings = GREEDY,
) -> tuple[str, GenerationReport]:
    report = GenerationReport()
    text = "".join(
        backend.stream_reply(messages, settings, stop or StopSignal(), report, conversation="c")
    )
    return text, report


def last_logits(ctx: Any, model: Any) -> np.ndarray:
    """The logits of the last token a context computed, copied."""
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), (n_vocab,)).copy()


def prompt_logits(backend: LlamaBackend, messages: list[ChatMessage]) -> np.ndarray:
    """The logits Floodgate's prompt ends with: a reply of one token decodes nothing after it."""
    if backend.batch is not None:
        ((_text, report),) = side_by_side(backend, [messages], FIRST_TOKEN)
    else:
        _text, report = reply(backend, messages, settings=FIRST_TOKEN)
    assert report.finish == "length", report.error
    return last_logits(backend._ctx, backend.native_model)


def assert_as_libmtmd_reads_it(backend: LlamaBackend, messages: list[ChatMessage]) -> None:
    """The prompt's last logits are those of libmtmd's helper: the positions are its.

    The same positions give the same logits (to the last bits at one thread, however the
    prompt was cut); the next text put 12 positions on, as if each embedding were one,
    moves them by about 1.
    """
    expected = libmtmd_logits(backend, messages)
    assert np.abs(prompt_logits(backend, messages) - expected).max() < 1e-3


def open_mrope(files: tuple[Path, Path], tmp_path: Path, parallel: int = 1) -> LlamaBackend:
    """The M-RoPE model with its projector.

    One thread, prompts in chunks of ``n_batch`` as libmtmd's helper reads them, and a
    reply's tokens read again within the next prompt (computed one by one they differ from
    that in more than the last bits): a prompt's logits then come out the same however it
    went into the KV cache (kept, stopped and resumed, restored).
    """
    model, projector = files
    options = EngineOptions(
        n_threads=1,
        n_threads_batch=1,
        n_ctx=2048,
        parallel=parallel,
        prefill_chunk_seconds=0.0,
        reuse_reply_tokens=False,  # a reply's tokens are read again with the next prompt
        projector=projector,
        cache_dir=tmp_path / "prompt-cache",
    )
    return open_llama(model, options)


@pytest.fixture
def seeing(files: tuple[Path, Path], tmp_path: Path) -> Iterator[LlamaBackend]:
    backend = open_mrope(files, tmp_path)
    yield backend
    backend.close()


def libmtmd_logits(backend: LlamaBackend, messages: list[ChatMessage]) -> np.ndarray:
    """The prompt's last logits as libmtmd's own helper puts it in a fresh context.

    ``mtmd_helper_eval_chunks`` is what llama.cpp's own tools run: the positions it gives
    each picture and each text after one are the reference.
    """
    _tokens, _stops, media = backend.render_prompt(messages, StopSignal(), None)
    assert media is not None
    projector = backend.projector
    assert projector is not None
    llm = backend._llm  # the same model and context settings, in a context of its own
    ctx = llama_cpp.llama_init_from_model(llm.model, llm.context_params)
    try:
        past = llama_cpp.llama_pos(0)
        n_batch = llama_cpp.llama_n_batch(ctx)
        code = mtmd.mtmd_helper_eval_chunks(
            projector._ctx, ctx, media._chunks, 0, 0, n_batch, True, ctypes.byref(past)
        )
        assert code == 0
        return last_logits(ctx, llm.model)
    finally:
        llama_cpp.llama_free(ctx)
        media.close()


def expected_last_position(backend: LlamaBackend, seq_id: int = 0) -> None:
    """llama.cpp's last position for the sequence: 12 fewer than its ids, less one."""
    sequence = backend._kv.sequences[seq_id]
    memory = llama_cpp.llama_get_memory(backend._ctx)
    held = len(sequence.tokens)
    assert llama_cpp.llama_memory_seq_pos_max(memory, seq_id) == held - 12 - 1
    assert sequence.in_step()


def test_a_picture_takes_fewer_positions_than_embeddings_as_libmtmd_places_it(
    seeing: LlamaBackend, tmp_path: Path
) -> None:
    projector = seeing.projector
    assert projector is not None
    assert projector.spans is not None  # the model's positions are M-RoPE
    assert seeing.info.sees
    p = picture(tmp_path)
    text, report = reply(seeing, ask(p))
    assert report.finish in ("done", "length"), report.error
    assert report.pictures_encoded == 1
    assert text.strip()
    placeholders = [t for t in seeing.sequence.tokens if t < 0]
    assert len(placeholders) == 18  # 6 x 3 cells
    assert projector.spans[placeholders[0]] == 6  # max(6, 3)
    expected_last_position(seeing)
    assert_as_libmtmd_reads_it(seeing, ask(p, "Say what you see."))


def test_a_follow_up_reuses_the_picture_at_its_positions(
    seeing: LlamaBackend, tmp_path: Path
) -> None:
    p = picture(tmp_path)
    first, report = reply(seeing, ask(p))
    expected = libmtmd_logits(seeing, follow_up(p, first))
    _, again = reply(seeing, follow_up(p, first), settings=FIRST_TOKEN)
    assert again.pictures_encoded == 0
    assert again.cached_tokens >= report.prompt_tokens  # picture and first turn reused
    assert np.abs(last_logits(seeing._ctx, seeing.native_model) - expected).max() < 1e-3


def test_stop_in_the_text_after_the_picture_then_a_retry_reads_as_without_it(
    seeing: LlamaBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = picture(tmp_path)
    # Longer than a chunk of n_batch (512) after the picture: Stop lands between two.
    long_text = "Describe it. " + "Tell me every detail of what you see, please. " * 80
    messages = ask(p, long_text)
    expected = libmtmd_logits(seeing, messages)
    prompt = seeing.render_prompt(messages, StopSignal(), None)[0]
    after_picture = max(i for i, t in enumerate(prompt) if t < 0) + 1
    stop = StopSignal()
    sequence = seeing.sequence
    put_chunk = KvSequence._put_chunk

    def stop_after_a_chunk_past_the_picture(self: KvSequence, *args: Any) -> int:
        code = put_chunk(self, *args)
        if len(self.tokens) > after_picture:
            stop.set()
        return code

    monkeypatch.setattr(KvSequence, "_put_chunk", stop_after_a_chunk_past_the_picture)
    text, stopped = reply(seeing, messages, stop)
    monkeypatch.undo()
    assert text == ""
    held = len(sequence.tokens)
    assert after_picture < held < stopped.prompt_tokens
    expected_last_position(seeing)
    _, again = reply(seeing, messages, settings=FIRST_TOKEN)
    assert again.cached_tokens == held  # resumed where it stopped, after the picture
    assert again.pictures_encoded == 0
    assert np.abs(last_logits(seeing._ctx, seeing.native_model) - expected).max() < 1e-3


def test_side_by_side_a_picture_takes_the_positions_it_takes_alone(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    p = picture(tmp_path)
    text_only: list[ChatMessage] = [{"role": "user", "content": "Name three colours."}]
    backend = open_mrope(files, tmp_path, parallel=2)
    try:
        (seen, report), (other, other_report) = side_by_side(backend, [ask(p), text_only], GREEDY)
        assert report.finish in ("done", "length"), report.error
        assert other_report.finish in ("done", "length"), other_report.error
        assert report.pictures_encoded == 1
        assert seen
        assert other
        picture_sequence = next(
            i for i, s in enumerate(backend._kv.sequences) if min(s.tokens, default=0) < 0
        )
        expected_last_position(backend, picture_sequence)
        assert_as_libmtmd_reads_it(backend, follow_up(p, seen))
    finally:
        backend.close()


def test_a_restart_restores_the_conversation_from_disk_with_its_positions(
    files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every kept prompt goes to disk, however little it cost.
    monkeypatch.setattr(kv_record, "DISK_WORTHY_SECONDS", 0.0)
    monkeypatch.setattr(loading, "DISK_WORTHY_SECONDS", 0.0)
    p = picture(tmp_path)
    first = open_mrope(files, tmp_path)
    try:
        text, _ = reply(first, ask(p))
    finally:
        first.close()  # waits for the write in flight
    assert list((tmp_path / "prompt-cache").rglob("*.fgkv"))
    second = open_mrope(files, tmp_path)
    try:
        expected = libmtmd_logits(second, follow_up(p, text))
        _, report = reply(second, follow_up(p, text), settings=FIRST_TOKEN)
        assert report.prefix_source == "disk"
        assert report.pictures_encoded == 0
        assert report.cached_tokens > 18
        assert np.abs(last_logits(second._ctx, second.native_model) - expected).max() < 1e-3
    finally:
        second.close()
