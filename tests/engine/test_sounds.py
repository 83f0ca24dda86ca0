"""Sounds for a model that hears: the real encoder (libmtmd), the real model, read once, Stop.

No audio model ships in a package, so these tests write an audio projector with random
weights (:mod:`app.standins.audio_projector`: a Qwen2-Audio-style Whisper encoder) whose
output width is the bundled model's: every step a real audio model takes is taken, from the
file's bytes decoded by libmtmd to the embeddings in the KV cache; only what the model says
about the sound means nothing. The files are real WAV, FLAC and MP3 files (libsndfile).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import soundfile
from llama_cpp import mtmd_cpp as mtmd
from PIL import Image

from app.engine import ChatMessage, EngineOptions, GenerationReport, GenerationSettings, StopSignal
from app.engine.context import fit_to_context
from app.engine.llama import LlamaBackend, open_llama
from app.engine.pictures import Picture, PictureError, digest_of
from app.engine.projector import MediaPrompt, _Bitmaps
from app.engine.reply_prompt import ReplyPrompts
from app.engine.sounds import (
    KINDS,
    MAX_SOUND_SECONDS,
    Sound,
    SoundError,
    check_sound,
    estimate_tokens,
    verify_sound,
)
from app.standins.audio_projector import LARGE, TOKENS_PER_WINDOW, AudioShape, write_audio_projector
from app.standins.projector import ProjectorShape, write_projector
from tests.support.batches import side_by_side
from tests.support.sounds import as_sound, write_sound

GREEDY = GenerationSettings(temperature=0.0, max_tokens=8)
SHAPE = AudioShape()

CANNOT_HEAR = (
    "The open model cannot hear sound. Open a model that can (one whose projector reads "
    "audio, such as Qwen2-Audio, Ultravox or Voxtral, with its mmproj file beside it), or "
    "send the message without it."
)


def ask(s: Sound, text: str = "What do you hear?") -> list[ChatMessage]:
    return [{"role": "user", "content": text, "sounds": (s,)}]


def reply(
    backend: LlamaBackend, messages: list[ChatMessage], stop: StopSignal | None = None
) -> tuple[str, GenerationReport]:
    report = GenerationReport()
    text = "".join(
        backend.stream_reply(messages, GREEDY, stop or StopSignal(), report, conversation="c")
    )
    return text, report


def placeholders(backend: LlamaBackend) -> list[int]:
    return [t for t in backend.sequence.tokens if t < 0]


def hearing_backend(model_path: Path, folder: Path, shape: AudioShape = SHAPE) -> LlamaBackend:
    projector = write_audio_projector(folder / "mmproj-audio-test.gguf", shape)
    options = EngineOptions(
        n_threads=2, n_ctx=4096, projector=projector, cache_dir=folder / "prompt-cache"
    )
    return open_llama(model_path, options)


@pytest.fixture
def hearing(model_path: Path, tmp_path: Path) -> Iterator[LlamaBackend]:
    backend = hearing_backend(model_path, tmp_path)
    yield backend
    backend.close()


# -- through the encoder and the model --------------------------------------------------


@pytest.mark.model
@pytest.mark.parametrize("name", ["voice.wav", "voice.flac", "voice.mp3"])
def test_a_sound_goes_through_the_encoder_and_the_model_and_a_reply_streams(
    hearing: LlamaBackend, tmp_path: Path, name: str
) -> None:
    assert hearing.info.hears
    assert not hearing.info.sees
    s = write_sound(tmp_path, name, seconds=1.5)
    text, report = reply(hearing, ask(s))
    assert report.finish in ("done", "length"), report.error
    assert text.strip()
    assert report.sounds_encoded == 1
    assert report.pictures_encoded == 0
    # A clip under 30 s is one window: its positions are in the prompt, with the text's.
    assert len(placeholders(hearing)) == TOKENS_PER_WINDOW
    assert report.prompt_tokens > TOKENS_PER_WINDOW
    assert hearing.projector is not None
    assert hearing.projector.encodes == 1


@pytest.mark.model
def test_a_sound_laid_out_before_is_laid_out_again_from_its_windows_alone(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follow-up does not compute the sound's spectrogram again (libmtmd does, at every
    layout): the prompt is the same, its windows are copies of the first layout's."""
    from app.engine.projector import MARKER, Projector

    long_one = write_sound(tmp_path, "long.wav", seconds=40)  # two windows
    short_one = write_sound(tmp_path, "short.flac", seconds=2, pitch=660)
    new_one = write_sound(tmp_path, "new.wav", seconds=3, pitch=220)
    text = f"<|im_start|>user\nListen: {MARKER} then {MARKER}<|im_end|>\n"
    backend = hearing_backend(model_path, tmp_path)
    (tmp_path / "other").mkdir()
    fresh = hearing_backend(model_path, tmp_path / "other")  # the same projector, new state
    try:
        projector, reference = backend.projector, fresh.projector
        assert projector is not None
        assert reference is not None
        made: list[str] = []

        def make(self: Any, item: Sound, occurrence: int, real: Any = _Bitmaps.make) -> Any:
            made.append(item.path.name)
            return real(self, item, occurrence)

        monkeypatch.setattr(_Bitmaps, "make", make)

        def layout(on: Projector, media: list[Sound]) -> tuple[list[int], list[tuple[int, ...]]]:
            prompt = on.prompt(text, media, add_special=True)
            try:
                # Each window's chunk is there, of its length (what the encoder reads).
                chunks = [mtmd.mtmd_input_chunk_get_n_tokens(prompt.chunk(r)) for r in prompt.runs]
                assert chunks == [r.length for r in prompt.runs]
                runs = [(r.start, r.length, r.tile, r.placeholder) for r in prompt.runs]
                return prompt.tokens, runs
            finally:
                prompt.close()

        first = layout(projector, [long_one, short_one])
        assert made == ["long.wav", "short.flac"]
        assert len(first[1]) == 3  # the long one's two windows, the short one's one
        # Laid out again, from the windows kept: nothing decoded, the same prompt.
        assert layout(projector, [long_one, short_one]) == first
        assert made == ["long.wav", "short.flac"]
        # Beside a new sound, a known one stands in as a tenth of a second of silence
        # whose window is replaced by its own: the same as a layout from scratch.
        mixed = layout(projector, [long_one, new_one])
        assert made[2:] == ["new.wav"]
        assert mixed == layout(reference, [long_one, new_one])
    finally:
        backend.close()
        fresh.close()


@pytest.mark.model
def test_a_follow_up_does_not_encode_the_sound_again(hearing: LlamaBackend, tmp_path: Path) -> None:
    s = write_sound(tmp_path)
    first, report = reply(hearing, ask(s))
    follow_up: list[ChatMessage] = [
        *ask(s),
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And how loud was it?"},
    ]
    _, again = reply(hearing, follow_up)
    assert again.finish in ("done", "length"), again.error
    assert again.sounds_encoded == 0
    assert hearing.projector is not None
    assert hearing.projector.encodes == 1
    # The sound and the first turn were reused from the KV cache, not processed again.
    assert again.cached_tokens >= report.prompt_tokens


@pytest.mark.model
def test_a_restart_reads_the_encoded_sound_from_disk(model_path: Path, tmp_path: Path) -> None:
    s = write_sound(tmp_path, "voice.flac")
    first = hearing_backend(model_path, tmp_path)
    try:
        text, report = reply(first, ask(s))
        assert report.sounds_encoded == 1
    finally:
        first.close()
    kept = list((tmp_path / "picture-cache").rglob(f"{s.digest}.0.npy"))
    assert len(kept) == 1
    assert np.load(kept[0]).shape == (TOKENS_PER_WINDOW, 576)
    second = hearing_backend(model_path, tmp_path)
    try:
        again, report = reply(second, ask(s))
        assert second.projector is not None
        assert second.projector.encodes == 0
        assert report.sounds_encoded == 0
        assert again == text  # the same embeddings, the same greedy reply
    finally:
        second.close()


@pytest.mark.model
def test_a_long_sound_is_a_window_per_started_30_seconds_and_the_fit_counts_them(
    hearing: LlamaBackend, tmp_path: Path
) -> None:
    s = write_sound(tmp_path, "long.wav", seconds=31, rate=8_000)
    # Reckoned from its header before it was ever laid out: two windows.
    assert hearing.sound_tokens(s) == 2 * TOKENS_PER_WINDOW
    projector = hearing.projector
    assert projector is not None
    media = projector.prompt(f"Listen: <__media__> {s.path.name}", [s], add_special=True)
    try:
        assert [(run.tile, run.length, run.media) for run in media.runs] == [
            (0, TOKENS_PER_WINDOW, s),
            (1, TOKENS_PER_WINDOW, s),
        ]
        assert len({run.placeholder for run in media.runs}) == 2  # never read as one run
    finally:
        media.close()
    assert projector.tokens_per_window == TOKENS_PER_WINDOW
    assert hearing.sound_tokens(s) == 2 * TOKENS_PER_WINDOW  # now as measured
    # The reckoning agrees with libmtmd where a window starts: exactly 30 s is two.
    for seconds, windows in ((29.9, 1), (30.0, 2)):
        edge = write_sound(tmp_path, f"edge-{seconds}.wav", seconds=seconds, rate=8_000)
        reckoned = hearing.sound_tokens(edge)
        media = projector.prompt("<__media__>", [edge], add_special=True)
        try:
            assert reckoned == len(media.runs) * TOKENS_PER_WINDOW == windows * TOKENS_PER_WINDOW
        finally:
            media.close()
    history: list[ChatMessage] = [
        *ask(s),
        {"role": "assistant", "content": "A tone."},
        {"role": "user", "content": "Tell me a word."},
    ]
    words: Callable[[str], int] = lambda text: len(text.split())  # noqa: E731
    kept, dropped = fit_to_context(history, words, 1000, 0, hearing.sound_tokens)
    assert dropped == 2  # the sound's 1,500 positions do not fit 1,000
    assert kept == history[2:]
    kept, dropped = fit_to_context(history, words, 1000)  # a model that cannot hear
    assert dropped == 0


# -- Stop ------------------------------------------------------------------------------


@pytest.fixture
def slow_to_hear(model_path: Path, tmp_path: Path) -> Iterator[LlamaBackend]:
    """An encoder that takes most of a second or more here: 1,500 positions, six blocks."""
    backend = hearing_backend(model_path, tmp_path, LARGE)
    yield backend
    backend.close()


def stop_when(
    report: GenerationReport, ready: Callable[[GenerationReport], bool], stop: StopSignal
) -> dict[str, float]:
    """Press Stop once ``ready(report)`` holds; returns when it was pressed."""
    pressed: dict[str, float] = {}

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ready(report):
                pressed["at"] = time.perf_counter()
                stop.set()
                return
            time.sleep(0.002)

    threading.Thread(target=watch, daemon=True).start()
    return pressed


@pytest.mark.model
def test_stop_during_the_audio_encode_lands_within_a_block_and_a_retry_completes(
    slow_to_hear: LlamaBackend, tmp_path: Path
) -> None:
    s = write_sound(tmp_path, seconds=2)
    stop, report = StopSignal(), GenerationReport()
    pressed = stop_when(report, lambda r: r.listening, stop)
    pieces = list(slow_to_hear.stream_reply(ask(s), GREEDY, stop, report, conversation="c"))
    ended = time.perf_counter()
    assert pieces == []
    assert report.finish == "stopped"
    assert "at" in pressed
    assert not report.listening
    projector = slow_to_hear.projector
    assert projector is not None
    # Thrown away: not counted as encoded, not kept, nothing of the sound in the KV cache.
    assert projector.encodes == 0
    assert report.sounds_encoded == 0
    assert not placeholders(slow_to_hear)
    assert not list((tmp_path / "picture-cache").rglob("*.npy"))
    stopped_in = ended - pressed["at"]
    # The retry encodes the whole window: the time Stop took is measured against it.
    text, whole = reply(slow_to_hear, ask(s))
    assert whole.finish in ("done", "length"), whole.error
    assert text
    assert whole.sounds_encoded == 1
    assert projector.encodes == 1
    assert len(placeholders(slow_to_hear)) == TOKENS_PER_WINDOW
    full = projector.last_encode_seconds
    print(f"Stop landed {stopped_in * 1000:.1f} ms after it was pressed; full encode {full:.3f} s")
    assert stopped_in < full / 2


# -- a model that cannot hear --------------------------------------------------------------


@pytest.mark.model
def test_a_sound_for_a_model_without_a_projector_is_refused_with_the_sentence(
    model_path: Path, tmp_path: Path
) -> None:
    backend = open_llama(model_path, EngineOptions(n_threads=2))
    try:
        assert not backend.info.hears
        assert backend.sound_tokens(write_sound(tmp_path)) == 0
        text, report = reply(backend, ask(write_sound(tmp_path)))
        assert text == ""
        assert report.finish == "error"
        assert report.error is not None
        assert str(report.error) == CANNOT_HEAR
        # An earlier turn's sound is left out silently: the conversation goes on.
        earlier: list[ChatMessage] = [
            *ask(write_sound(tmp_path)),
            {"role": "assistant", "content": "A tone."},
            {"role": "user", "content": "Tell me a word."},
        ]
        text, report = reply(backend, earlier)
        assert report.finish in ("done", "length"), report.error
        assert text
        assert not placeholders(backend)
    finally:
        backend.close()


@pytest.mark.model
def test_a_model_that_sees_but_cannot_hear_refuses_a_sound_and_leaves_an_earlier_one_out(
    model_path: Path, tmp_path: Path
) -> None:
    shape = ProjectorShape()
    projector = write_projector(tmp_path / "mmproj-vision-test.gguf", shape)
    backend = open_llama(model_path, EngineOptions(n_threads=2, projector=projector))
    path = tmp_path / "photo.png"
    pixels = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    picture = Picture(digest_of(path.read_bytes()), path)
    try:
        assert backend.info.sees
        assert not backend.info.hears
        _, refused = reply(backend, ask(write_sound(tmp_path)))
        assert refused.finish == "error"
        assert str(refused.error) == CANNOT_HEAR
        earlier: list[ChatMessage] = [
            *ask(write_sound(tmp_path)),
            {"role": "assistant", "content": "A tone."},
            {"role": "user", "content": "And this picture?", "pictures": (picture,)},
        ]
        _, report = reply(backend, earlier)
        assert report.finish in ("done", "length"), report.error
        assert report.pictures_encoded == 1
        assert report.sounds_encoded == 0
        # The picture's positions, and none of the sound's.
        assert len(placeholders(backend)) == shape.tokens_per_image
    finally:
        backend.close()


# -- the prompt's layout, without a model -----------------------------------------------------


class Recorder:
    """A projector that records the prompt it is asked to lay out."""

    def __init__(self, *, sees: bool, hears: bool) -> None:
        self.sees = sees
        self.hears = hears
        self.asked: list[tuple[str, list[object]]] = []

    def prompt(self, text: str, media: list[object], add_special: bool) -> MediaPrompt:
        self.asked.append((text, list(media)))
        return MediaPrompt([1, 2, 3], [], None)


class Plain:
    """A format that writes each turn's content on a line."""

    def render(
        self, messages: list[ChatMessage], stop: StopSignal
    ) -> tuple[str, tuple[str, ...], bool]:
        return "\n".join(m["content"] for m in messages), (), True


def prompts(projector: Recorder) -> ReplyPrompts:
    return ReplyPrompts(SimpleNamespace(ctx=None), projector, Plain(), 100)  # type: ignore[arg-type]


def test_a_turns_pictures_then_its_sounds_go_before_its_text(tmp_path: Path) -> None:
    recorder = Recorder(sees=True, hears=True)
    one, two = write_sound(tmp_path, "a.wav"), write_sound(tmp_path, "b.flac", seed=1)
    picture = Picture("d" * 64, tmp_path / "p.png")
    messages: list[ChatMessage] = [
        {"role": "user", "content": "Both?", "sounds": (one, two), "pictures": (picture,)},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "Again.", "sounds": (one,)},
    ]
    tokens, _, media = prompts(recorder).render(messages, StopSignal(), None)
    assert media is not None
    assert tokens == [1, 2, 3]
    text, items = recorder.asked[0]
    marker = "<__media__>"
    assert text == f"{marker * 3}Both?\nYes.\n{marker}Again."
    assert items == [picture, one, two, one]


def test_seen_leaves_out_only_what_the_model_cannot_read(tmp_path: Path) -> None:
    s = write_sound(tmp_path)
    picture = Picture("d" * 64, tmp_path / "p.png")
    both: ChatMessage = {"role": "user", "content": "Hi", "pictures": (picture,), "sounds": (s,)}
    later: list[ChatMessage] = [{"role": "assistant", "content": "Hello"}]
    seeing = prompts(Recorder(sees=True, hears=False))
    kept = seeing.seen([both, *later, {"role": "user", "content": "So?"}])
    assert kept[0] == {"role": "user", "content": "Hi", "pictures": (picture,)}
    hearing = prompts(Recorder(sees=False, hears=True))
    kept = hearing.seen([both, *later, {"role": "user", "content": "So?"}])
    assert kept[0] == {"role": "user", "content": "Hi", "sounds": (s,)}
    with pytest.raises(SoundError) as refused:
        seeing.seen([*later, both])
    assert str(refused.value) == CANNOT_HEAR
    with pytest.raises(PictureError, match="cannot see pictures"):
        hearing.seen([*later, both])
    # A model that reads both gets the turns as they are.
    assert prompts(Recorder(sees=True, hears=True)).seen([both]) == [both]


# -- files: formats, lengths, damage ------------------------------------------------------


@pytest.mark.parametrize(("name", "kind"), [("s.wav", "WAV"), ("s.flac", "FLAC"), ("s.mp3", "MP3")])
def test_check_sound_reports_the_format_and_the_length_from_the_header(
    tmp_path: Path, name: str, kind: str
) -> None:
    s = write_sound(tmp_path, name, seconds=2.5, rate=22_050)
    assert kind in KINDS
    found, seconds = check_sound(s.path)
    assert found == kind
    assert seconds == pytest.approx(2.5, abs=0.06)  # MP3 frames round it
    assert verify_sound(s.path) == (found, seconds)
    # The data folder keeps a sound under its digest, without a suffix: told by its bytes.
    bare = tmp_path / s.digest
    bare.write_bytes(s.path.read_bytes())
    assert check_sound(bare) == (found, seconds)


@pytest.mark.parametrize("name", ["cut.wav", "cut.flac", "cut.mp3"])
def test_a_sound_cut_short_is_said_damaged_when_it_is_verified(tmp_path: Path, name: str) -> None:
    whole = write_sound(tmp_path, "whole" + Path(name).suffix, seconds=3).path.read_bytes()
    cut = tmp_path / name
    cut.write_bytes(whole[: len(whole) // 2])
    check_sound(cut)  # its header alone may still read
    with pytest.raises(SoundError) as refused:
        verify_sound(cut)
    assert str(refused.value) == (
        f"{name} is not a sound Floodgate can read (WAV, MP3 or FLAC), or it is damaged."
    )


def test_a_text_file_named_wav_is_not_a_sound(tmp_path: Path) -> None:
    fake = tmp_path / "notes.wav"
    fake.write_text("These are my notes, not a recording.\n" * 20)
    for read in (check_sound, verify_sound):
        with pytest.raises(SoundError, match=r"notes\.wav is not a sound Floodgate can read"):
            read(fake)


def test_a_sound_longer_than_the_limit_is_refused_from_its_header(tmp_path: Path) -> None:
    path = tmp_path / "lecture.wav"
    rate = 8_000
    seconds = int(MAX_SOUND_SECONDS) + 1  # silence, 8-bit at 8 kHz: 4.8 MB
    soundfile.write(path, np.zeros(seconds * rate, np.float32), rate, subtype="PCM_U8")
    started = time.perf_counter()
    with pytest.raises(SoundError) as refused:
        check_sound(path)
    assert time.perf_counter() - started < 0.5  # the header, not the samples
    assert str(refused.value) == (
        "lecture.wav is 10:01 long (minutes:seconds); Floodgate reads sounds of up to 10 "
        "minutes. Attach a shorter part of it."
    )
    with pytest.raises(SoundError, match="10:01"):
        verify_sound(path)


def test_a_header_that_claims_more_than_the_file_holds_is_damaged(tmp_path: Path) -> None:
    data = bytearray(write_sound(tmp_path, "short.wav").path.read_bytes())
    at = data.index(b"data")
    claimed = int(MAX_SOUND_SECONDS * 2) * 16_000 * 2
    data[at + 4 : at + 8] = struct.pack("<I", claimed)
    data[4:8] = struct.pack("<I", claimed + at)
    liar = tmp_path / "liar.wav"
    liar.write_bytes(bytes(data))
    with pytest.raises(SoundError, match="damaged"):
        verify_sound(liar)


def test_a_missing_sound_says_the_systems_reason(tmp_path: Path) -> None:
    with pytest.raises(SoundError) as refused:
        check_sound(tmp_path / "gone.wav")
    assert str(refused.value) == "gone.wav could not be read: No such file or directory"


def test_a_sound_is_reckoned_a_window_per_started_30_seconds(tmp_path: Path) -> None:
    assert estimate_tokens(write_sound(tmp_path, "a.wav", 1.0, rate=8_000).path) == 750
    assert estimate_tokens(write_sound(tmp_path, "b.wav", 29.9, rate=8_000).path) == 750
    # As libmtmd cuts it, a sound of 30 s (one of 60 s) starts a second (third) window.
    assert estimate_tokens(write_sound(tmp_path, "d.wav", 30.0, rate=8_000).path) == 2 * 750
    assert estimate_tokens(write_sound(tmp_path, "e.wav", 60.0, rate=8_000).path) == 3 * 750
    assert estimate_tokens(write_sound(tmp_path, "f.wav", 600.0, rate=8_000).path) == 21 * 750
    assert estimate_tokens(write_sound(tmp_path, "c.wav", 31.0, rate=8_000).path, 100) == 200
    assert estimate_tokens(tmp_path / "gone.wav") == 750  # unreadable: one window, then its error


@pytest.mark.model
def test_a_file_that_is_not_a_sound_gets_its_sentence_and_the_model_stays_usable(
    hearing: LlamaBackend, tmp_path: Path
) -> None:
    fake = tmp_path / "notes.wav"
    fake.write_text("These are my notes, not a recording.\n" * 20)
    text, report = reply(hearing, ask(as_sound(fake)))
    assert text == ""
    assert report.finish == "error"
    assert str(report.error) == (
        "notes.wav is not a sound Floodgate can read (WAV, MP3 or FLAC), or it is damaged."
    )
    _, after = reply(hearing, ask(write_sound(tmp_path)))
    assert after.finish in ("done", "length"), after.error
    assert after.sounds_encoded == 1


# -- side by side -------------------------------------------------------------------------------


@pytest.mark.model
def test_a_sound_in_a_batch_of_two_is_encoded_once_and_heard_as_alone(
    model_path: Path, tmp_path: Path
) -> None:
    projector = write_audio_projector(tmp_path / "mmproj-audio-test.gguf")
    options = EngineOptions(n_threads=2, n_ctx=2048, parallel=2, projector=projector)
    backend = open_llama(model_path, options)
    s = write_sound(tmp_path, "voice.mp3")
    text_only: list[ChatMessage] = [{"role": "user", "content": "Name three colours."}]
    try:
        assert backend.batch is not None
        (heard, report), (other, other_report) = side_by_side(backend, [ask(s), text_only], GREEDY)
        assert report.finish in ("done", "length"), report.error
        assert other_report.finish in ("done", "length"), other_report.error
        assert heard
        assert other
        assert report.sounds_encoded == 1
        assert report.batch_peak == 2
        # Alone in the batch, the same reply: its embeddings kept, not encoded again.
        ((alone, again),) = side_by_side(backend, [ask(s)], GREEDY)
        assert again.sounds_encoded == 0
        assert alone == heard
        assert backend.projector is not None
        assert backend.projector.encodes == 1
    finally:
        backend.close()
