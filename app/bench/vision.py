"""The ``vision`` section: a picture and a sound through their projectors, read once, and Stop.

No vision model ships in a package, so the section writes the tests' projector with random
weights (:mod:`app.standins.projector`, its larger shape: 1,024 patches through 12 blocks)
for the bundled model: the figures are facts of this build and this machine, not of a real
vision model's encoder.

- ``encode_ms``: one 1024 by 768 picture encoded (median, with its interval);
- ``encode_hook_ratio``: the encoder's speed with the Stop hook over without it, in
  interleaved pairs (target >= 0.95);
- ``stop_encode_ms``: Stop pressed at a random moment of an encode, to the reply's end (p95
  target <= 50);
- ``follow_up_ratio``: time to first token of a follow-up in a conversation with a picture over
  the same follow-up without it (target <= 1.5): the picture is not encoded again.

Beside it, ``peer``: llama-cpp-python's ``MTMDChatHandler`` on the same follow-ups in a bare
child (:mod:`app.bench.vision_peer`), which encodes the picture again on every turn.

``sound``: the same figures for a 30-second WAV through the tests' audio projector
(:mod:`app.standins.audio_projector`, its larger shape), one encoder window of 750 positions
(targets as for pictures). A follow-up lays the sound out again, which computes its
spectrogram again (libmtmd's tokenizer does that); its embeddings come from RAM.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from app.bench.engine_drive import EngineThread
from app.bench.plan import Setup
from app.bench.stats import median_with_ci, summary
from app.engine import ChatMessage, GenerationSettings
from app.engine.llama import LlamaBackend
from app.engine.pictures import Picture, digest_of
from app.engine.projector import MARKER, Media, Projector
from app.engine.sounds import Sound
from app.engine.threads import physical_cores
from app.flow.metrics import Distribution
from app.standins.audio_projector import LARGE as AUDIO_LARGE
from app.standins.audio_projector import write_audio_projector
from app.standins.projector import LARGE, write_projector

GREEDY = GenerationSettings(temperature=0.0, max_tokens=8)


def vision(setup: Setup, pairs: int = 8, stops: int = 10) -> dict[str, Any]:
    """The section's figures: a picture's at the top, a sound's under ``sound``."""
    with tempfile.TemporaryDirectory(prefix="floodgate-vision-") as folder:
        root = Path(folder)
        projector = write_projector(root / "mmproj-bench.gguf", LARGE)
        picture = _picture(root / "picture.png", 1024, 768)
        setup.log("  vision: a picture…")
        seen = _encoder(setup, projector, picture, pairs, stops)
        setup.log("  vision: llama-cpp-python's MTMDChatHandler, the same follow-ups…")
        peer = _peer(setup, projector, picture, pairs)
        setup.log(f"  vision: a sound of {SOUND_SECONDS} s…")
        ears = write_audio_projector(root / "mmproj-bench-audio.gguf", AUDIO_LARGE)
        sound = _sound(root / "sound.wav", SOUND_SECONDS)
        heard = _encoder(setup, ears, sound, pairs, stops)
    return {
        "projector": {
            "image_size": LARGE.image_size,
            "tokens_per_image": LARGE.tokens_per_image,
            "blocks": LARGE.blocks,
            "width": LARGE.width,
        },
        **seen,
        "peer": peer,
        "sound": {
            "seconds": SOUND_SECONDS,
            "projector": {"blocks": AUDIO_LARGE.blocks, "width": AUDIO_LARGE.width},
            **heard,
        },
    }


SOUND_SECONDS = 30
"""The bench's sound: one window of a Whisper-style encoder (750 positions here)."""


def _encoder(setup: Setup, projector: Path, media: Media, pairs: int, stops: int) -> dict[str, Any]:
    """One item's figures through ``projector``.

    Its encode with the Stop hook and without, Stop in the encoder, and a follow-up with it
    in the conversation against the same follow-up without it.
    """
    options = replace(setup.options, projector=projector, cache_dir=None, cache_ram_mb=0)
    with EngineThread() as engine:
        backend = engine.open(setup.model, options)
        try:
            hooked = backend.projector
            assert hooked is not None
            bare = engine.call(
                lambda: Projector(projector, backend.native_model, _threads(setup), stop_hook=False)
            )
            try:
                setup.log("    the encoder with and without the Stop hook…")
                with_hook: list[float] = []
                without: list[float] = []
                for projector_ in (hooked, bare):  # warm: the first encode pays for it
                    engine.call(partial(_encode_seconds, projector_, media))
                for i in range(pairs):
                    order = ((hooked, with_hook), (bare, without))
                    for p, into in order if i % 2 == 0 else order[::-1]:
                        into.append(engine.call(partial(_encode_seconds, p, media)))
            finally:
                engine.call(bare.close)
            setup.log("    Stop in the encoder…")
            stop_ms = _stops(engine, backend, media, hooked, stops, setup.rng)
            setup.log("    a follow-up with it and without…")
            follow = _follow_ups(engine, backend, media, pairs)
        finally:
            engine.close(backend)
    encode_ms, encode_ci = median_with_ci([s * 1000 for s in with_hook])
    ratios = [b / h for h, b in zip(with_hook, without, strict=True)]
    hook_ratio, hook_ci = median_with_ci(ratios)
    return {
        "encode_ms": round(encode_ms, 2),
        "encode_ms_ci": [round(v, 2) for v in encode_ci],
        "encode_without_hook_ms": round(statistics.median(without) * 1000, 2),
        "encode_hook_ratio": round(hook_ratio, 4),
        "encode_hook_ratio_ci": [round(v, 4) for v in hook_ci],
        "stop_encode_ms": summary(stop_ms),
        **follow,
    }


def _peer(setup: Setup, projector: Path, picture: Picture, rounds: int) -> dict[str, Any]:
    """llama-cpp-python's handler on the same follow-ups, in a bare child (see vision_peer)."""
    spec = {
        "model": str(setup.model),
        "projector": str(projector),
        "picture": str(picture.path),
        "rounds": max(2, rounds // 2),
        "threads": _threads(setup),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app.bench.vision_peer", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        return {"problem": str(exc)[:300]}
    found["follow_up_ratio"] = round(found["follow_up_ms"] / found["follow_up_text_only_ms"], 4)
    return {key: round(value, 2) for key, value in found.items()}


def _threads(setup: Setup) -> int:
    return setup.options.n_threads_batch or physical_cores()


def _picture(path: Path, width: int, height: int) -> Picture:
    pixels = np.random.default_rng(7).integers(0, 255, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return Picture(digest_of(path.read_bytes()), path)


def _sound(path: Path, seconds: int, rate: int = 16_000) -> Sound:
    """A mono 16-bit WAV: a tone under a little noise."""
    times = np.arange(seconds * rate) / rate
    noise = np.random.default_rng(7).standard_normal(times.size) * 0.05
    samples = (0.3 * np.sin(2 * np.pi * 440.0 * times) + noise) * 32767
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.astype("<i2").tobytes())
    return Sound(digest_of(path.read_bytes()), path)


def _encode_seconds(projector: Projector, item: Media) -> float:
    """One encode of ``item`` (nothing kept from before), in seconds: all its chunks."""
    prompt = projector.prompt(MARKER, [item], add_special=False)
    try:
        projector.forget_kept()
        started = time.perf_counter()
        for run in prompt.runs:
            projector.embeddings(prompt, run)
        return time.perf_counter() - started
    finally:
        prompt.close()


def _ask(item: Media | None, text: str) -> ChatMessage:
    message: ChatMessage = {"role": "user", "content": text}
    if isinstance(item, Sound):
        message["sounds"] = (item,)
    elif item is not None:
        message["pictures"] = (item,)
    return message


def _stops(
    engine: EngineThread,
    backend: LlamaBackend,
    item: Media,
    projector: Projector,
    trials: int,
    rng: random.Random,
) -> Distribution:
    """Stop at a random moment of an encode: from Stop to the reply's end, in ms."""
    seconds = projector.last_encode_seconds or 0.2
    latencies = Distribution()
    for trial in range(trials):
        engine.call(projector.forget_kept)
        engine.call(backend.sequence.clear)
        delay = rng.uniform(0.1, 0.8) * seconds
        waited: list[float] = []

        def when(
            report: Any, _elapsed: float, delay: float = delay, waited: list[float] = waited
        ) -> bool:
            if not (report.looking or report.listening):
                return False
            if not waited:
                waited.append(time.perf_counter())
            return time.perf_counter() - waited[0] >= delay

        reply = engine.reply(
            backend, [_ask(item, "Describe it.")], GREEDY, f"stop-{trial}", stop_when=when
        )
        ended = reply.report.compute_ended_at
        # Only a Stop that fell inside the encode (none encoded) says what the hook does.
        encoded = reply.report.pictures_encoded + reply.report.sounds_encoded
        if reply.stop_set_at is not None and ended is not None and not encoded:
            latencies.add((ended - reply.stop_set_at) * 1000)
    return latencies


def _follow_ups(
    engine: EngineThread, backend: LlamaBackend, item: Media, rounds: int
) -> dict[str, Any]:
    """Time to first token of a follow-up, with ``item`` in the conversation and without."""
    with_picture: list[float] = []
    without: list[float] = []
    for i in range(rounds):
        for shown, into in ((item, with_picture), (None, without)):
            name = f"follow-{i}-{'media' if shown else 'text'}"
            first = [_ask(shown, "What is in it?")]
            answer = engine.reply(backend, first, GREEDY, name).text
            follow_up: list[ChatMessage] = [
                *first,
                {"role": "assistant", "content": answer},
                {"role": "user", "content": "Say it in one word."},
            ]
            # To the first token's logits (the random projector's model may say nothing).
            asked = time.perf_counter()
            ended = engine.reply(backend, follow_up, GREEDY, name).report.prefill_ended_at
            into.append((ended - asked) * 1000 if ended is not None else math.nan)
    ratios = [a / b for a, b in zip(with_picture, without, strict=True) if b > 0]
    ratio, interval = median_with_ci(ratios)
    return {
        "follow_up_ms": round(statistics.median(with_picture), 2),
        "follow_up_text_only_ms": round(statistics.median(without), 2),
        "follow_up_ratio": round(ratio, 4),
        "follow_up_ratio_ci": [round(v, 4) for v in interval],
    }
