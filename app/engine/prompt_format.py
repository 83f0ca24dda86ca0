"""A conversation rendered in the model's own format, with the strings that end its replies."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import llama_cpp
from llama_cpp import llama_chat_format

from app.engine.backend import ChatMessage
from app.engine.chat_template import ChatTemplate, TemplateError
from app.engine.errors import ModelLoadError
from app.engine.model_card import CHAT_TEMPLATE_KEY, read_chat_template
from app.engine.stop import StopSignal
from app.sentence import Sentence

# The engine's log, as before it was split up.
log = logging.getLogger("app.engine.llama")


class PromptFormat:
    """Renders a conversation in the model's own format, with the strings that end replies.

    A GGUF chat template (from llama-cpp-python's metadata, or read from the file's header
    when llama-cpp-python could not read it) is rendered by :class:`ChatTemplate` in Jinja's
    sandbox, within Stop and its budgets. A model without one gets llama-cpp-python's
    fallback format ("llama-2"), as before.
    """

    def __init__(self, llm: llama_cpp.Llama, path: Path) -> None:
        metadata: dict[str, str] = llm.metadata
        source: str | None = metadata.get(CHAT_TEMPLATE_KEY)
        if source is None:
            try:
                source = read_chat_template(path)
            except ModelLoadError as exc:
                log.warning("No chat template read from %s: %s", path.name, exc)
        self.has_template = source is not None
        self.chat_format = str(llm.chat_format)
        if source is not None and CHAT_TEMPLATE_KEY not in metadata:
            self.chat_format = "chat_template.default"
        self.template: ChatTemplate | None = None
        self.error: Sentence | None = None
        if source is not None:
            model = llm._model
            try:
                self.template = ChatTemplate(
                    source,
                    bos_token=_token_text(model, llm.token_bos()),
                    eos_token=_token_text(model, llm.token_eos()),
                )
            except TemplateError as exc:
                self.error = exc.sentence

    def render(
        self, messages: Sequence[ChatMessage], stop: StopSignal
    ) -> tuple[str, tuple[str, ...], bool]:
        """The prompt text, its stop strings, and whether a BOS token must be added to it.

        Raises:
            TemplateError: the template could not render the prompt (or Stop was pressed).
        """
        if self.error is not None:
            raise TemplateError(self.error)
        if self.template is not None:
            rendered = self.template.render(messages, stop)
            # A template writes its own special tokens (llama-cpp-python: added_special).
            return rendered.text, rendered.stop_strings, False
        formatted = llama_chat_format.format_llama2(messages=cast(Any, list(messages)))
        stops = formatted.stop
        stop_strings = (stops,) if isinstance(stops, str) else tuple(stops or ())
        return formatted.prompt, stop_strings, True


def _token_text(model: Any, token: int) -> str:
    return str(model.token_get_text(token)) if token != -1 else ""
