"""Pictures for a model that sees: the real encoder (libmtmd), the real model, read once, Stop.

No vision model ships in a package, so these tests write a projector with random weights
(:mod:`app.standins.projector`) whose output width is the bundled model's: every step a real
vision model takes is taken, only what the model says about the picture means nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.engine import ChatMessage, EngineOptions, GenerationReport, GenerationSettings, StopSignal
from app.engine.errors import ModelLoadError
from app.engine.llama import LlamaBackend, open_llama
from app.engine.model_card import read_model_card
from app.engine.pictures import MAX_PIXELS, Picture, PictureError, digest_of, read_rgb
from app.standins.projector import LARGE, ProjectorShape, write_projector

pytestmark = pytest.mark.model

GREEDY = GenerationSettings(temperature=0.0, max_tokens=12)
SHAPE = ProjectorShape()


def picture(
    folder: Path, name: str = "photo.png", seed: int = 0, size: tuple[int, int] = (320, 240)
) -> Picture:
    """A noisy RGB picture written as ``name`` (its suffix picks the format)."""
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    path = folder / name
    Image.fromarray(pixels).save(path)
    return Picture(digest_of(path.read_bytes()), path)


def ask(p: Picture, text: str = "What is in this picture?") -> list[ChatMessage]:
    return [{"role": "user", "content": text, "pictures": (p,)}]


def reply(
    backend: LlamaBackend, messages: list[ChatMessage], stop: StopSignal | None = None
) -> tuple[str, GenerationReport]:
    report = GenerationReport()
    text = "".join(
        backend.stream_reply(messages, GREEDY, stop or StopSignal(), report, conversation="c")
    )
    return text, report


@pytest.fixture
def seeing(model_path: Path, tmp_path: Path) -> Iterator[LlamaBackend]:
    projector = write_projector(tmp_path / "mmproj-test.gguf", SHAPE)
    options = EngineOptions(n_threads=2, projector=projector, cache_dir=tmp_path / "prompt-cache")
    backend = open_llama(model_path, options)
    yield backend
    backend.close()


def test_a_picture_goes_through_the_encoder_and_the_model_and_a_reply_streams(
    seeing: LlamaBackend, tmp_path: Path
) -> None:
    assert seeing.info.sees
    assert not seeing.info.hears
    p = picture(tmp_path)
    text, report = reply(seeing, ask(p))
    assert report.finish in ("done", "length"), report.error
    assert text.strip()
    assert report.pictures_encoded == 1
    # The picture's positions are in the prompt: its tokens plus the text's.
    placeholders = [t for t in seeing.sequence.tokens if t < 0]
    assert len(placeholders) == SHAPE.tokens_per_image
    assert report.prompt_tokens > SHAPE.tokens_per_image


def test_a_follow_up_does_not_encode_the_picture_again(
    seeing: LlamaBackend, tmp_path: Path
) -> None:
    p = picture(tmp_path)
    first, report = reply(seeing, ask(p))
    follow_up = [
        *ask(p),
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And the colours?"},
    ]
    _, again = reply(seeing, follow_up)
    assert again.finish in ("done", "length"), again.error
    assert again.pictures_encoded == 0
    assert seeing.projector is not None
    assert seeing.projector.encodes == 1
    # The picture and the first turn were reused from the KV cache, not processed again.
    assert again.cached_tokens >= report.prompt_tokens


def test_another_picture_is_encoded_and_gives_other_embeddings(
    seeing: LlamaBackend, tmp_path: Path
) -> None:
    one, two = picture(tmp_path, "a.png", seed=1), picture(tmp_path, "b.png", seed=2)
    reply(seeing, ask(one))
    reply(seeing, ask(two))
    projector = seeing.projector
    assert projector is not None
    assert projector.encodes == 2
    kept = sorted((tmp_path / "picture-cache").rglob("*.npy"))
    assert len(kept) == 2
    a, b = (np.load(path) for path in kept)
    assert a.shape == (SHAPE.tokens_per_image, 576)
    assert not np.allclose(a, b)


def test_a_restart_reads_the_encoded_picture_from_disk(model_path: Path, tmp_path: Path) -> None:
    projector = write_projector(tmp_path / "mmproj-test.gguf", SHAPE)
    options = EngineOptions(n_threads=2, projector=projector, cache_dir=tmp_path / "prompt-cache")
    p = picture(tmp_path)
    first = open_llama(model_path, options)
    try:
        text, _ = reply(first, ask(p))
    finally:
        first.close()
    second = open_llama(model_path, options)
    try:
        again, report = reply(second, ask(p))
        assert second.projector is not None
        assert second.projector.encodes == 0
        assert report.pictures_encoded == 0
        assert again == text  # the same embeddings, the same greedy reply
    finally:
        second.close()


def test_a_picture_for_a_model_that_cannot_see_is_refused_with_a_sentence(
    model_path: Path, tmp_path: Path
) -> None:
    backend = open_llama(model_path, EngineOptions(n_threads=2))
    try:
        assert not backend.info.sees
        text, report = reply(backend, ask(picture(tmp_path)))
    finally:
        backend.close()
    assert text == ""
    assert report.finish == "error"
    assert report.error is not None
    assert "cannot see pictures" in str(report.error)


def test_a_corrupt_picture_gets_a_sentence_and_the_model_stays_usable(
    seeing: LlamaBackend, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.png"
    good = picture(tmp_path)
    broken.write_bytes(good.path.read_bytes()[:200])  # a PNG cut short
    text, report = reply(seeing, ask(Picture(digest_of(broken.read_bytes()), broken)))
    assert text == ""
    assert report.finish == "error"
    assert "broken.png" in str(report.error)
    assert "damaged" in str(report.error)
    _, after = reply(seeing, ask(good))
    assert after.finish in ("done", "length")


def test_a_huge_picture_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "huge.png"
    side = int((MAX_PIXELS * 1.25) ** 0.5)
    Image.new("1", (side, side)).save(path)  # 1 bit per pixel: a small file, many pixels
    with pytest.raises(PictureError) as refused:
        read_rgb(path)
    assert "megapixels" in str(refused.value)


@pytest.mark.parametrize("name", ["p.png", "p.jpg", "p.webp", "p.bmp", "p.gif"])
def test_every_kind_of_picture_people_attach_is_read(tmp_path: Path, name: str) -> None:
    p = picture(tmp_path, name, size=(40, 30))
    width, height, rgb = read_rgb(p.path)
    assert (width, height) == (40, 30)
    assert len(rgb) == 40 * 30 * 3


def test_a_gif_is_read_from_its_first_frame(tmp_path: Path) -> None:
    path = tmp_path / "moving.gif"
    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(path, save_all=True, append_images=frames[1:])
    _, _, rgb = read_rgb(path)
    assert rgb[:3] == bytes((255, 0, 0))


def test_a_projector_for_another_model_is_refused_with_a_sentence(
    model_path: Path, tmp_path: Path
) -> None:
    other = write_projector(tmp_path / "mmproj-other.gguf", ProjectorShape(text_width=2048))
    with pytest.raises(ModelLoadError) as refused:
        open_llama(model_path, EngineOptions(n_threads=2, projector=other))
    assert "mmproj-other.gguf" in str(refused.value)
    assert "another model" in str(refused.value)


def test_a_projector_remembered_for_the_model_that_fails_leaves_it_open_for_text(
    model_path: Path, tmp_path: Path
) -> None:
    other = write_projector(tmp_path / "mmproj-other.gguf", ProjectorShape(text_width=2048))
    gone = tmp_path / "mmproj-moved-away.gguf"
    with pytest.raises(ModelLoadError, match=r"mmproj-moved-away\.gguf cannot be read"):
        open_llama(model_path, EngineOptions(n_threads=2, projector=gone))
    for projector, says in ((other, "could not be opened"), (gone, "cannot be read")):
        options = EngineOptions(n_threads=2, projector=projector, projector_fallback=True)
        backend = open_llama(model_path, options)
        try:
            assert backend.projector is None
            assert backend.info.projector is None
            problem = str(backend.info.projector_problem)
            assert projector.name in problem
            assert says in problem
        finally:
            backend.close()


def test_a_projector_beside_the_model_opens_with_it_unless_none_was_chosen(
    model_path: Path, tmp_path: Path
) -> None:
    model = tmp_path / "SmolVLM-test-Q4_1.gguf"
    model.symlink_to(model_path)
    beside = write_projector(tmp_path / "mmproj-SmolVLM-test-f16.gguf", SHAPE)
    for options, sees in (
        (EngineOptions(n_threads=2), True),
        (EngineOptions(n_threads=2, projector_beside=False), False),
    ):
        backend = open_llama(model, options)
        try:
            assert backend.info.sees is sees
            assert backend.info.projector == (beside if sees else None)
            assert backend.info.projector_problem is None
        finally:
            backend.close()


def test_a_projector_beside_the_model_that_fails_is_told_and_the_model_reads_text(
    model_path: Path, tmp_path: Path
) -> None:
    model = tmp_path / "SmolVLM-test-Q4_1.gguf"
    model.symlink_to(model_path)
    beside = write_projector(
        tmp_path / "mmproj-SmolVLM-test-f16.gguf", ProjectorShape(text_width=2048)
    )
    backend = open_llama(model, EngineOptions(n_threads=2))
    try:
        assert not backend.info.sees
        assert backend.projector is None
        problem = str(backend.info.projector_problem)
        assert beside.name in problem
        assert "could not be opened" in problem
        reply = "".join(
            backend.stream_reply(
                [{"role": "user", "content": "Hi"}],
                GenerationSettings(temperature=0.0, max_tokens=4),
                StopSignal(),
                GenerationReport(),
            )
        )
        assert reply
    finally:
        backend.close()


def test_a_damaged_projector_is_refused_with_a_sentence(model_path: Path, tmp_path: Path) -> None:
    whole = write_projector(tmp_path / "mmproj-test.gguf", SHAPE).read_bytes()
    damaged = tmp_path / "mmproj-damaged.gguf"
    damaged.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ModelLoadError) as refused:
        open_llama(model_path, EngineOptions(n_threads=2, projector=damaged))
    assert "mmproj-damaged.gguf" in str(refused.value)


# -- Stop ----------------------------------------------------------------------------


@pytest.fixture
def slow_to_see(model_path: Path, tmp_path: Path) -> Iterator[LlamaBackend]:
    """A projector whose encode takes a few hundred ms here: 1,024 patches, 12 blocks."""
    projector = write_projector(tmp_path / "mmproj-large.gguf", LARGE)
    backend = open_llama(model_path, EngineOptions(n_threads=2, projector=projector, n_ctx=2048))
    yield backend
    backend.close()


def stop_when(report: GenerationReport, ready: object, stop: StopSignal) -> dict[str, float]:
    """Press Stop once ``ready(report)`` holds; returns when it was pressed."""
    pressed: dict[str, float] = {}

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ready(report):  # type: ignore[operator]
                pressed["at"] = time.perf_counter()
                stop.set()
                return
            time.sleep(0.002)

    threading.Thread(target=watch, daemon=True).start()
    return pressed


def test_stop_during_the_encode_lands_within_a_block_and_keeps_nothing_of_it(
    slow_to_see: LlamaBackend, tmp_path: Path
) -> None:
    p = picture(tmp_path, size=(1024, 768))
    stop, report = StopSignal(), GenerationReport()
    pressed = stop_when(report, lambda r: r.looking, stop)
    pieces = list(slow_to_see.stream_reply(ask(p), GREEDY, stop, report, conversation="c"))
    ended = time.perf_counter()
    assert pieces == []
    assert report.finish == "stopped"
    assert "at" in pressed
    projector = slow_to_see.projector
    assert projector is not None
    # Thrown away: not counted as encoded, not kept, nothing of the picture in the KV cache.
    assert projector.encodes == 0
    assert report.pictures_encoded == 0
    assert not [t for t in slow_to_see.sequence.tokens if t < 0]
    # Within a block of the encode, not at its end (the whole encode, measured next, is
    # several blocks longer than the time Stop took).
    stopped_in = ended - pressed["at"]
    _, whole = reply(slow_to_see, ask(p))
    assert whole.finish in ("done", "length")
    assert projector.encodes == 1
    assert stopped_in < projector.last_encode_seconds / 2


def test_stop_during_the_pictures_decode_takes_it_out_whole_then_a_retry_completes(
    slow_to_see: LlamaBackend, tmp_path: Path
) -> None:
    p = picture(tmp_path, size=(1024, 768))
    stop, report = StopSignal(), GenerationReport()
    # Encoded, and its 1,024 embeddings on their way into the model.
    stop_when(report, lambda r: r.pictures_encoded == 1 and not r.looking, stop)
    pieces = list(slow_to_see.stream_reply(ask(p), GREEDY, stop, report, conversation="c"))
    assert pieces == []
    assert report.finish == "stopped"
    tokens = slow_to_see.sequence.tokens
    assert not [t for t in tokens if t < 0]  # none of the picture's positions kept
    assert slow_to_see.sequence.in_step()
    _, again = reply(slow_to_see, ask(p))
    assert again.finish in ("done", "length")
    assert again.pictures_encoded == 0  # its embeddings were kept
    assert len([t for t in slow_to_see.sequence.tokens if t < 0]) == LARGE.tokens_per_image


# -- a vision model is one thing to the user ------------------------------------------


def models_folder(model_path: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A models folder holding the bundled model under a vision model's name."""
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "SmolVLM-test-Q4_1.gguf"
    model.symlink_to(model_path)
    return folder, model


def test_the_library_pairs_a_model_with_the_projector_beside_it(
    model_path: Path, tmp_path: Path
) -> None:
    folder, model = models_folder(model_path, tmp_path)
    mine = write_projector(folder / "mmproj-SmolVLM-test-f16.gguf", SHAPE)
    write_projector(folder / "mmproj-another-model-f16.gguf", ProjectorShape(text_width=2048))
    card = read_model_card(model)
    assert card.projector == mine
    assert card.sees
    assert not card.hears
    assert read_model_card(mine).is_projector  # listed with its model, not as a model
    backend = open_llama(model, EngineOptions(n_threads=2))
    try:
        assert backend.info.sees
        assert backend.info.projector == mine
    finally:
        backend.close()


def test_a_damaged_projector_beside_a_model_leaves_it_open_for_text(
    model_path: Path, tmp_path: Path
) -> None:
    folder, model = models_folder(model_path, tmp_path)
    whole = write_projector(tmp_path / "whole.gguf", SHAPE).read_bytes()
    (folder / "mmproj-SmolVLM-test-f16.gguf").write_bytes(whole[: len(whole) // 2])
    backend = open_llama(model, EngineOptions(n_threads=2))
    try:
        assert not backend.info.sees
        text, report = reply(backend, [{"role": "user", "content": "Hello"}])
        assert report.finish in ("done", "length")
        assert text
    finally:
        backend.close()


def test_the_same_picture_twice_is_two_pictures_side_by_side(
    seeing: LlamaBackend, tmp_path: Path
) -> None:
    p = picture(tmp_path)
    messages: list[ChatMessage] = [
        {"role": "user", "content": "Are these the same?", "pictures": (p, p)}
    ]
    _, report = reply(seeing, messages)
    assert report.finish in ("done", "length"), report.error
    marks = [t for t in seeing.sequence.tokens if t < 0]
    assert len(marks) == 2 * SHAPE.tokens_per_image
    assert len(set(marks)) == 2  # two runs, never read as one
    assert report.pictures_encoded == 1  # the same picture: encoded once


def test_a_conversation_with_pictures_goes_on_with_a_model_that_cannot_see(
    model_path: Path, tmp_path: Path
) -> None:
    p = picture(tmp_path)
    backend = open_llama(model_path, EngineOptions(n_threads=2))
    try:
        earlier = [
            *ask(p),
            {"role": "assistant", "content": "A picture of noise."},
            {"role": "user", "content": "Tell me a word."},
        ]
        text, report = reply(backend, earlier)
        assert report.finish in ("done", "length"), report.error
        assert text
        _, refused = reply(backend, [*earlier[:3], *ask(p, "And this one?")])
        assert refused.finish == "error"
        assert "cannot see pictures" in str(refused.error)
    finally:
        backend.close()


def test_in_a_folder_of_several_models_a_projector_goes_only_with_its_own(
    model_path: Path, tmp_path: Path
) -> None:
    folder, model = models_folder(model_path, tmp_path)
    other = folder / "Llama-3.2-1B-Q4_K_M.gguf"
    other.symlink_to(model_path)
    generic = write_projector(folder / "mmproj-F16.gguf", SHAPE)
    # A name that says whose it is not: paired with neither.
    assert read_model_card(model).projector is None
    assert read_model_card(other).projector is None
    generic.unlink()
    mine = write_projector(folder / "mmproj-SmolVLM-test-f16.gguf", SHAPE)
    assert read_model_card(model).projector == mine
    assert read_model_card(other).projector is None
