"""Sounds through the local API server: ``input_audio`` parts, the real model with a test
audio projector beside it, and the official ``openai`` client."""

from __future__ import annotations

import base64
import io
import math
import struct
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from app.engine import EngineOptions
from app.engine.llama import open_llama
from app.standins.audio_projector import write_audio_projector
from tests.support.loop import Loop
from tests.support.serving import Served, serve

pytestmark = pytest.mark.model


def wav_base64(seconds: float = 0.5) -> str:
    """A mono 16 kHz tone as a WAV file's bytes, base64-encoded."""
    rate = 16_000
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(rate)
        sound.writeframes(
            b"".join(
                struct.pack("<h", int(9_000 * math.sin(2 * math.pi * 330 * i / rate)))
                for i in range(int(rate * seconds))
            )
        )
    return base64.b64encode(out.getvalue()).decode("ascii")


def with_sound(data: str, kind: str = "wav", text: str = "What do you hear?") -> list[Any]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "input_audio", "input_audio": {"data": data, "format": kind}},
            ],
        }
    ]


@pytest.fixture
def served(loop: Loop, model_path: Path, tmp_path: Path) -> Iterator[Served]:
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "Qwen2-Audio-test-Q4_1.gguf"
    model.symlink_to(model_path)
    write_audio_projector(folder / "mmproj-Qwen2-Audio-test-f16.gguf")
    served = serve(loop, open_llama, model, options=EngineOptions(n_ctx=2048, parallel=2))
    try:
        yield served
    finally:
        served.server.stop()


def test_a_sound_is_heard_and_a_follow_up_reuses_it(client: openai.OpenAI) -> None:
    messages = with_sound(wav_base64())
    first = client.chat.completions.create(
        model="any", messages=messages, temperature=0, max_tokens=6
    )
    assert first.choices[0].finish_reason in ("stop", "length")
    assert first.usage is not None
    assert first.usage.prompt_tokens > 750  # a 30-second window's positions beside the text
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "Louder?"},
    ]
    second = client.chat.completions.create(
        model="any", messages=messages, temperature=0, max_tokens=6
    )
    assert second.usage is not None
    details = second.usage.prompt_tokens_details
    assert details is not None
    assert details.cached_tokens is not None
    assert details.cached_tokens >= first.usage.prompt_tokens  # not read (or encoded) again


@pytest.mark.parametrize(
    ("data", "kind", "param", "words"),
    [
        ("@@@@", "wav", "input_audio.data", "not valid base64"),
        (wav_base64(0.1), "ogg", "input_audio.format", "not 'ogg'"),
        (
            base64.b64encode(b"RIFF\x00\x00\x00\x00WAVE" + bytes(8)).decode(),
            "wav",
            "input_audio",
            "",
        ),
    ],
)
def test_a_sound_the_server_cannot_use_is_a_400_naming_the_part(
    client: openai.OpenAI, data: str, kind: str, param: str, words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="any", messages=with_sound(data, kind), max_tokens=4)
    assert caught.value.status_code == 400
    assert caught.value.param == f"messages[0].content[1].{param}"  # type: ignore[attr-defined]
    assert words in caught.value.message
    # The server goes on answering.
    fine = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    assert fine.choices[0].message.content is not None


def test_a_picture_for_a_model_that_hears_but_cannot_see_is_a_400(
    client: openai.OpenAI,
) -> None:
    picture = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        }
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="any", messages=picture, max_tokens=4)  # type: ignore[arg-type]
    assert caught.value.code == "model_cannot_see"
    assert caught.value.param == "messages[0].content[1]"  # type: ignore[attr-defined]
