"""A reply's prompt as the llama.cpp engine reads it: token ids that fit, with its pictures.

The turns are rendered in the model's own format (:class:`PromptFormat`) and tokenized; a
prompt with pictures is rendered through the model's projector instead. A picture's
positions in a prompt hold placeholder ids (:mod:`app.engine.projector`); the projector
encodes the picture (or finds it kept) and decodes its embeddings into a sequence when
prompt processing reaches them. A model without a projector that sees goes on with a
conversation that had pictures, without them, as long as the newest prompt has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import llama_cpp

from app.engine.backend import ChatMessage, GenerationReport
from app.engine.failures import ContextOverflowError
from app.engine.generation import DECODE_ABORTED
from app.engine.pictures import PictureError
from app.engine.projector import MARKER, EncodeStoppedError, MediaPrompt, Projector
from app.engine.prompt_format import PromptFormat
from app.engine.sequence import KvSequence
from app.engine.stop import StopSignal
from app.sentence import QT_TRANSLATE_NOOP, Sentence

_NO_PICTURE = -100
"""The code a picture feeder returns for a position where no picture starts (a bug)."""

_CANNOT_SEE = Sentence(
    QT_TRANSLATE_NOOP(
        "Floodgate",
        "The open model cannot see pictures. Open a model that can (one with a projector, an "
        "mmproj file beside it, such as SmolVLM or Gemma 3), or send the message without them.",
    )
)


class ReplyPrompts:
    """A model's prompts: its turns rendered and tokenized, their pictures fed in whole.

    Args:
        llm: the loaded model and context (its tokenizer; pictures are decoded into it).
        projector: what lets the model see pictures (None: text only).
        prompt_format: the model's own format.
        n_ctx: a sequence's context, which a prompt must fit.
    """

    def __init__(
        self,
        llm: llama_cpp.Llama,
        projector: Projector | None,
        prompt_format: PromptFormat,
        n_ctx: int,
    ) -> None:
        self._llm = llm
        self._ctx: Any = llm.ctx
        self._projector = projector
        self._format = prompt_format
        self._n_ctx = n_ctx

    def render(
        self, messages: Sequence[ChatMessage], stop: StopSignal, plain: str | None
    ) -> tuple[list[int], tuple[str, ...], MediaPrompt | None]:
        """The prompt's token ids, the strings that end its reply, and its pictures (or None).

        The turns' pictures are left out if the model cannot see (:meth:`seen`); a prompt
        that has some is rendered through the projector (:meth:`render_pictures`), and its
        pictures must be closed once the reply is over. ``plain``: a plain text to continue
        instead of the turns (the API's completions).

        Raises:
            TemplateError: the chat template failed (or Stop was pressed while it ran).
            PictureError: the model cannot see the newest prompt's pictures, or one is unread.
            ProjectorError: libmtmd refused the prompt.
            ContextOverflowError: the prompt does not fit a sequence's context.
        """
        messages = self.seen(messages)
        if plain is None and any(message.get("pictures") for message in messages):
            media, stop_strings = self.render_pictures(messages, stop)
            return media.tokens, stop_strings, media
        prompt, stop_strings = self.render_text(messages, stop, plain)
        return prompt, stop_strings, None

    def render_text(
        self, messages: Sequence[ChatMessage], stop: StopSignal, plain: str | None
    ) -> tuple[list[int], tuple[str, ...]]:
        """The token ids of a prompt without pictures, and the strings that end its reply.

        Raises:
            TemplateError: the chat template failed (or Stop was pressed while it ran).
            ContextOverflowError: the prompt does not fit a sequence's context.
        """
        if plain is None:
            text, stop_strings, add_bos = self._format.render(messages, stop)
        else:  # a plain text to continue, read as llama-cpp-python's create_completion does
            text, stop_strings, add_bos = plain, (), True
        prompt: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
        n_ctx = self._n_ctx
        if len(prompt) >= n_ctx:
            # llama-cpp-python's own words for it, which the sentence quotes.
            raise ContextOverflowError(
                f"Requested tokens ({len(prompt)}) exceed context window of {n_ctx}"
            )
        return prompt, stop_strings

    def seen(self, messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        """The turns as this model reads them: without their pictures if it cannot see.

        A conversation with pictures goes on with a model that cannot see them (its pictures
        left out) as long as the newest prompt has none.

        Raises:
            PictureError: the newest prompt has pictures and the model cannot see.
        """
        if self._projector is not None and self._projector.sees:
            return messages
        if not any(m.get("pictures") for m in messages):
            return messages
        last_user = next((m for m in reversed(messages) if m["role"] == "user"), None)
        if last_user is not None and last_user.get("pictures"):
            raise PictureError(_CANNOT_SEE)
        return [{"role": m["role"], "content": m["content"]} for m in messages]

    def render_pictures(
        self, messages: Sequence[ChatMessage], stop: StopSignal
    ) -> tuple[MediaPrompt, tuple[str, ...]]:
        """The prompt of a conversation with pictures: tokens, placeholders, stop strings.

        Raises:
            PictureError: the model cannot see, or a picture cannot be read.
            ProjectorError: libmtmd refused the prompt.
            ContextOverflowError: the prompt does not fit a sequence's context.
        """
        projector = self._projector
        if projector is None or not projector.sees:
            raise PictureError(_CANNOT_SEE)
        pictures = [p for message in messages for p in message.get("pictures", ())]
        marked: list[ChatMessage] = [
            {
                "role": message["role"],
                "content": MARKER * len(message.get("pictures", ())) + message["content"],
            }
            for message in messages
        ]
        text, stop_strings, add_bos = self._format.render(marked, stop)
        media = projector.prompt(text, pictures, add_special=add_bos)
        if len(media.tokens) >= self._n_ctx:
            n = len(media.tokens)
            media.close()
            raise ContextOverflowError(
                f"Requested tokens ({n}) exceed context window of {self._n_ctx}"
            )
        return media, stop_strings

    def listen(self, stop: StopSignal) -> Callable[[], None]:
        """Let ``stop`` reach the projector's encoder; returns what undoes it once done."""
        projector = self._projector
        if projector is None:
            return _nothing
        remove = stop.add_listener(projector.stop_requested())

        def undo() -> None:
            remove()
            projector.lower_stop()

        return undo

    def feed(
        self,
        media: MediaPrompt,
        sequence: KvSequence,
        report: GenerationReport,
        position: int,
        stop: StopSignal,
    ) -> tuple[int, int]:
        """Put the picture starting at ``position`` into ``sequence`` (for the batch).

        The reply's Stop reaches the encoder while it runs. Returns llama_decode's code and
        how many positions the picture filled.
        """
        assert self._projector is not None
        undo = self.listen(stop)
        try:
            if stop.is_set():
                return DECODE_ABORTED, 0
            return self.feeder(media, sequence, report)(position)
        finally:
            undo()

    def feeder(
        self, media: MediaPrompt, sequence: KvSequence, report: GenerationReport
    ) -> Callable[[int], tuple[int, int]]:
        """What puts the picture starting at a position into ``sequence`` (see prefill)."""
        projector = self._projector
        assert projector is not None
        ctx = self._ctx

        def feed(position: int) -> tuple[int, int]:
            run = media.run_at(position)
            if run is None:
                return _NO_PICTURE, 0
            encodes = projector.encodes
            report.looking = True
            try:
                embeddings = projector.embeddings(media, run)
            except EncodeStoppedError:
                return DECODE_ABORTED, 0
            finally:
                report.looking = False
                report.pictures_encoded += projector.encodes - encodes
            return projector.decode(ctx, media, run, embeddings, sequence.seq_id), run.length

        return feed


def _nothing() -> None:
    """Nothing to undo (a model without a projector)."""
