"""Pictures through the local API server: ``image_url`` parts with ``data:`` URLs, the real
model with a test projector beside it, and the official ``openai`` client."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from PIL import Image

from app.engine import EngineOptions
from app.engine.llama import open_llama
from app.standins.projector import ProjectorShape, write_projector
from tests.support.loop import Loop
from tests.support.serving import Served, serve

pytestmark = pytest.mark.model


def data_url(seed: int = 0) -> str:
    pixels = np.random.default_rng(seed).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def with_picture(url: str, text: str = "What is in this picture?") -> list[Any]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]


@pytest.fixture
def served(loop: Loop, model_path: Path, tmp_path: Path) -> Iterator[Served]:
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "SmolVLM-test-Q4_1.gguf"
    model.symlink_to(model_path)
    write_projector(folder / "mmproj-SmolVLM-test-f16.gguf", ProjectorShape())
    served = serve(loop, open_llama, model, options=EngineOptions(n_ctx=2048, parallel=2))
    try:
        yield served
    finally:
        served.server.stop()


def test_a_picture_as_a_data_url_is_seen_and_a_follow_up_reuses_it(
    client: openai.OpenAI,
) -> None:
    messages = with_picture(data_url())
    first = client.chat.completions.create(
        model="any", messages=messages, temperature=0, max_tokens=8
    )
    assert first.choices[0].finish_reason in ("stop", "length")
    assert first.usage is not None
    # The picture's positions are in the prompt (16 for the test projector) beside the text.
    assert first.usage.prompt_tokens > ProjectorShape().tokens_per_image
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "And the colours?"},
    ]
    second = client.chat.completions.create(
        model="any", messages=messages, temperature=0, max_tokens=8
    )
    assert second.usage is not None
    details = second.usage.prompt_tokens_details
    assert details is not None
    assert details.cached_tokens is not None
    assert details.cached_tokens >= first.usage.prompt_tokens  # not read (or encoded) again


@pytest.mark.parametrize(
    ("url", "param", "words"),
    [
        ("https://example.com/cat.png", "image_url.url", "does not fetch pictures"),
        ("data:image/png;base64,@@@@", "image_url.url", "not valid base64"),
        ("data:image/png," + "x" * 10, "image_url.url", "must be base64"),
        (
            "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(40)).decode(),
            "image_url.url",
            "damaged",
        ),
    ],
)
def test_a_picture_the_server_cannot_use_is_a_400_naming_the_part(
    client: openai.OpenAI,
    url: str,
    param: str,
    words: str,
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="any", messages=with_picture(url), max_tokens=4)
    assert caught.value.status_code == 400
    assert caught.value.param == f"messages[0].content[1].{param}"  # type: ignore[attr-defined]
    assert words in caught.value.message
    # The server goes on answering.
    fine = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    assert fine.choices[0].message.content is not None


def test_a_sound_for_a_model_that_sees_but_cannot_hear_is_a_400(client: openai.OpenAI) -> None:
    sound = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this?"},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            ],
        }
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="any", messages=sound, max_tokens=4)  # type: ignore[arg-type]
    assert caught.value.code == "model_cannot_hear"
    assert caught.value.param == "messages[0].content[1]"  # type: ignore[attr-defined]
    assert "cannot hear sound" in caught.value.message
