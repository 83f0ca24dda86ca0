"""The ``vision`` section's peer: llama-cpp-python's ``MTMDChatHandler``, in a bare child.

``python -m app.bench.vision_peer SPEC`` (a JSON object: model, projector, picture, rounds,
threads) asks the same first turn and follow-up as the section does, through
``Llama.create_chat_completion`` with the handler, and prints one JSON line: the median time
to the follow-up's first token with the picture in the conversation and without it. The
handler clears the KV cache and encodes every picture of the history on every call, which is
what this figure shows beside Floodgate's.
"""

from __future__ import annotations

import base64
import json
import statistics
import sys
import time
from typing import Any

CHATML_PARTS = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n"
    "{% if message.content is string %}{{ message.content }}"
    "{% else %}{% for part in message.content %}{{ part.text }}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML with a message's content as text or as parts (the peer's template)."""


def _first_token_ms(llm: Any, messages: list[dict[str, Any]]) -> float:
    asked = time.perf_counter()
    for chunk in llm.create_chat_completion(
        messages=messages, stream=True, max_tokens=8, temperature=0.0
    ):
        delta = chunk["choices"][0].get("delta", {})
        if delta.get("content") or chunk["choices"][0].get("finish_reason"):
            return (time.perf_counter() - asked) * 1000
    return (time.perf_counter() - asked) * 1000


def main() -> None:
    """Measure and print the peer's figures."""
    spec = json.loads(sys.argv[1])
    from llama_cpp import Llama  # loads llama.cpp here, in the child only
    from llama_cpp.llama_chat_format import MTMDChatHandler

    class ChatMLHandler(MTMDChatHandler):
        """The bundled model's own format (ChatML), over content given as parts.

        SmolLM2's template reads a message's content as one string; the handler gives it a
        list of parts (text, and the media marker where a picture goes).
        """

        def _get_chat_template(self, llama_model: Any) -> str:
            return CHATML_PARTS

    handler = ChatMLHandler(clip_model_path=spec["projector"], verbose=False, use_gpu=False)
    llm = Llama(
        model_path=spec["model"],
        chat_handler=handler,
        n_ctx=4096,
        n_threads=spec["threads"],
        n_threads_batch=spec["threads"],
        verbose=False,
    )
    with open(spec["picture"], "rb") as handle:
        url = "data:image/png;base64," + base64.b64encode(handle.read()).decode("ascii")
    shown: list[float] = []
    text_only: list[float] = []
    for _ in range(int(spec["rounds"])):
        for picture, into in ((True, shown), (False, text_only)):
            content: Any = "What is in this picture?"
            if picture:
                content = [
                    {"type": "text", "text": content},
                    {"type": "image_url", "image_url": {"url": url}},
                ]
            first: Any = [{"role": "user", "content": content}]
            answer: Any = llm.create_chat_completion(messages=first, max_tokens=8, temperature=0.0)
            follow_up = [
                *first,
                {"role": "assistant", "content": answer["choices"][0]["message"]["content"]},
                {"role": "user", "content": "Say it in one word."},
            ]
            into.append(_first_token_ms(llm, follow_up))
    print(
        json.dumps(
            {
                "follow_up_ms": statistics.median(shown),
                "follow_up_text_only_ms": statistics.median(text_only),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
