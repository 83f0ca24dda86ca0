"""The local API server with the official ``openai`` client, on the real model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.llama import open_llama
from tests.support.loop import Loop
from tests.support.serving import STORY, Served, serve, wait_until

pytestmark = pytest.mark.model


@pytest.fixture
def served(loop: Loop, model_path: Path) -> Iterator[Served]:
    served = serve(loop, open_llama, model_path)
    try:
        yield served
    finally:
        served.server.stop()


def ask(client: openai.OpenAI, text: str, **kwargs: object) -> openai.types.chat.ChatCompletion:
    reply: openai.types.chat.ChatCompletion = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": text}], **kwargs
    )
    return reply


def test_models_lists_the_open_model(served: Served, client: openai.OpenAI) -> None:
    models = client.models.list().data
    assert [m.id for m in models] == ["SmolLM2-135M-Instruct"]  # its one name
    assert models[0].object == "model"


def test_chat_reply_streamed_equals_the_whole_one(client: openai.OpenAI) -> None:
    whole = ask(client, STORY, temperature=0, max_tokens=40)
    choice = whole.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason == "length"
    assert whole.usage is not None
    assert whole.usage.completion_tokens == 40
    assert whole.usage.prompt_tokens > 10
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + 40

    chunks = list(
        client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": STORY}],
            temperature=0,
            max_tokens=40,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length"
    assert all(f is None for f in finishes[:-1])
    # The usage chunk comes last, with no choices, and only it carries usage.
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 40
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_without_usage_has_no_usage_chunk(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=8,
            stream=True,
        )
    )
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)


def test_a_reply_that_ends_by_itself_says_stop(client: openai.OpenAI) -> None:
    reply = ask(client, "Say just the word yes.", temperature=0, max_tokens=200)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.completion_tokens < 200


def test_stop_strings_end_the_reply_before_them(client: openai.OpenAI) -> None:
    free = ask(client, STORY, temperature=0, max_tokens=40).choices[0].message.content
    assert free is not None
    words = free.split()
    cut = words[len(words) // 2]
    stopped = ask(client, STORY, temperature=0, max_tokens=40, stop=[cut])
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == free[: free.index(cut)]


def test_a_seed_repeats_a_sampled_reply(client: openai.OpenAI) -> None:
    first = ask(client, STORY, temperature=1.0, seed=7, max_tokens=24)
    second = ask(client, STORY, temperature=1.0, seed=7, max_tokens=24)
    other = ask(client, STORY, temperature=1.0, seed=8, max_tokens=24)
    assert first.choices[0].message.content == second.choices[0].message.content
    assert other.choices[0].message.content != first.choices[0].message.content


def test_penalties_change_the_sampling(client: openai.OpenAI) -> None:
    plain = ask(client, STORY, temperature=0, max_tokens=60)
    penalised = ask(
        client, STORY, temperature=0, max_tokens=60, frequency_penalty=2.0, presence_penalty=2.0
    )
    assert plain.choices[0].message.content != penalised.choices[0].message.content


def test_json_schema_reply_parses_and_follows_the_schema(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "likes_storms": {"type": "boolean"},
        },
        "required": ["name", "age", "likes_storms"],
        "additionalProperties": False,
    }
    reply = ask(
        client,
        "Describe the lighthouse keeper.",
        temperature=0,
        max_tokens=200,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "keeper", "schema": schema, "strict": True},
        },
    )
    content = reply.choices[0].message.content
    assert content is not None
    data = json.loads(content)
    assert set(data) == {"name", "age", "likes_storms"}
    assert isinstance(data["name"], str)
    assert isinstance(data["age"], int)
    assert isinstance(data["likes_storms"], bool)


def test_json_object_reply_parses(client: openai.OpenAI) -> None:
    reply = ask(
        client,
        "Give the keeper's name and age.",
        temperature=0,
        max_tokens=200,
        response_format={"type": "json_object"},
    )
    content = reply.choices[0].message.content
    assert content is not None
    assert isinstance(json.loads(content), dict)


def test_a_schema_that_is_no_schema_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(
            client,
            "x",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "no-such-type"}},
            },
        )
    assert caught.value.body is not None
    assert caught.value.param == "response_format.json_schema.schema"  # type: ignore[attr-defined]


def test_text_completion_continues_the_prompt(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="any", prompt="Once upon a time", max_tokens=12, temperature=0
    )
    assert reply.object == "text_completion"
    assert reply.choices[0].text
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 12
    streamed = client.completions.create(
        model="any", prompt="Once upon a time", max_tokens=12, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed) == reply.choices[0].text


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"logit_bias": {"1": 5}}, "logit_bias"),
    ],
)
def test_unsupported_fields_are_refused_by_name(
    client: openai.OpenAI, extra: dict[str, object], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, "Hi", max_tokens=4, **extra)
    error = caught.value
    assert error.status_code == 400
    assert error.param == param  # type: ignore[attr-defined]
    assert param in error.message


def test_an_image_is_refused_naming_its_place(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="any",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    ],
                }
            ],
        )
    assert caught.value.param == "messages[0].content[1]"  # type: ignore[attr-defined]


def test_the_second_turn_reuses_the_first(served: Served, client: openai.OpenAI) -> None:
    history: list[dict[str, str]] = [
        {"role": "system", "content": "You are a storyteller."},
        {"role": "user", "content": STORY},
    ]
    first = client.chat.completions.create(
        model="any",
        messages=history,  # type: ignore[arg-type]
        temperature=0,
        max_tokens=30,
    )
    history += [
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "And then?"},
    ]
    second = client.chat.completions.create(
        model="any",
        messages=history,  # type: ignore[arg-type]
        temperature=0,
        max_tokens=30,
    )
    assert first.usage is not None
    assert second.usage is not None
    details = second.usage.prompt_tokens_details
    assert details is not None
    # The prompt of the first turn is kept; only the reply and the new question are read.
    assert details.cached_tokens is not None
    assert details.cached_tokens >= first.usage.prompt_tokens - 2
    assert second.usage.prompt_tokens > first.usage.prompt_tokens


def test_requests_are_recorded_for_the_window(served: Served, client: openai.OpenAI) -> None:
    ask(client, "Hi", max_tokens=4, temperature=0)
    with pytest.raises(openai.BadRequestError):
        ask(client, "Hi", n=3)
    recorded = served.requests()
    wait_until(lambda: all(r.outcome is not None for r in recorded))
    assert [r.endpoint for r in recorded] == ["/v1/chat/completions"] * 2
    assert recorded[0].outcome == "length"
    assert recorded[0].client.startswith("127.0.0.1:")
    assert recorded[1].outcome == "refused"
    assert "n > 1" in recorded[1].reason


def test_no_model_open_is_a_503(served: Served) -> None:
    served.session.host.model = None
    reply = httpx.post(
        served.url + "/chat/completions", json={"messages": [{"role": "user", "content": "x"}]}
    )
    assert reply.status_code == 503
    assert reply.json()["error"]["code"] == "model_not_loaded"
