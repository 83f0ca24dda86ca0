"""A reply's prompt as the llama.cpp engine reads it: token ids that fit, with its media.

The turns are rendered in the model's own format (:class:`PromptFormat`) and tokenized; a
prompt with pictures or sounds is rendered through the model's projector instead, each turn's
pictures then its sounds placed before its text. Their positions in a prompt hold placeholder
ids (:mod:`app.engine.projector`); the projector encodes each (or finds it kept) and decodes
its embeddings into a sequence when prompt processing reaches them. A model that cannot see
(or hear) goes on with a conversation that had pictures (or sounds), without them, as long as
the newest prompt has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import llama_cpp

from app.engine.backend import ChatMessage, GenerationReport
from app.engine.failures import ContextOverflowError
from app.engine.generation import DECODE_ABORTED
from app.engine.pictures import PictureError
from app.engine.projector import MARKER, EncodeStoppedError, Media, MediaPrompt, Projector
from app.engine.prompt_format import PromptFormat
from app.engine.sequence import KvSequence
from app.engine.sounds import SoundError
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

_CANNOT_HEAR = Sentence(
    QT_TRANSLATE_NOOP(
        "Floodgate",
        "The open model cannot hear sound. Open a model that can (one whose projector reads "
        "audio, such as Qwen2-Audio, Ultravox or Voxtral, with its mmproj file beside it), or "
        "send the message without it.",
    )
)


class ReplyPrompts:
    """A model's prompts: its turns rendered and tokenized, their pictures and sounds fed in whole.

    Args:
        llm: the loaded model and context (its tokenizer; media are decoded into it).
        projector: what lets the model see pictures or hear sounds (None: text only).
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
        """The prompt's token ids, the strings that end its reply, and its media (or None).

        The turns' pictures are left out if the model cannot see, their sounds if it cannot
        hear (:meth:`seen`); a prompt that has some is rendered through the projector
        (:meth:`render_media`), and its media must be closed once the reply is over.
        ``plain``: a plain text to continue instead of the turns (the API's completions).

        Raises:
            TemplateError: the chat template failed (or Stop was pressed while it ran).
            PictureError: the model cannot see the newest prompt's pictures, or one is unread.
            SoundError: the model cannot hear the newest prompt's sounds, or one is unread.
            ProjectorError: libmtmd refused the prompt.
            ContextOverflowError: the prompt does not fit a sequence's context.
        """
        messages = self.seen(messages)
        if plain is None and any(_media(message) for message in messages):
            media, stop_strings = self.render_media(messages, stop)
            return media.tokens, stop_strings, media
        prompt, stop_strings = self.render_text(messages, stop, plain)
        return prompt, stop_strings, None

    def render_text(
        self, messages: Sequence[ChatMessage], stop: StopSignal, plain: str | None
    ) -> tuple[list[int], tuple[str, ...]]:
        """The token ids of a prompt without media, and the strings that end its reply.

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
        """The turns as this model reads them: without what it cannot see or hear.

        A conversation with pictures (sounds) goes on with a model that cannot see (hear) them,
        left out, as long as the newest prompt has none. What it can read stays.

        Raises:
            PictureError: the newest prompt has pictures and the model cannot see.
            SoundError: the newest prompt has sounds and the model cannot hear.
        """
        projector = self._projector
        sees = projector is not None and projector.sees
        hears = projector is not None and projector.hears
        blind = not sees and any(m.get("pictures") for m in messages)
        deaf = not hears and any(m.get("sounds") for m in messages)
        if not blind and not deaf:
            return messages
        last_user = next((m for m in reversed(messages) if m["role"] == "user"), None)
        if last_user is not None:
            if blind and last_user.get("pictures"):
                raise PictureError(_CANNOT_SEE)
            if deaf and last_user.get("sounds"):
                raise SoundError(_CANNOT_HEAR)
        kept: list[ChatMessage] = []
        for message in messages:
            turn: ChatMessage = {"role": message["role"], "content": message["content"]}
            if sees and message.get("pictures"):
                turn["pictures"] = message["pictures"]
            if hears and message.get("sounds"):
                turn["sounds"] = message["sounds"]
            kept.append(turn)
        return kept

    def render_media(
        self, messages: Sequence[ChatMessage], stop: StopSignal
    ) -> tuple[MediaPrompt, tuple[str, ...]]:
        """The prompt of a conversation with pictures or sounds: tokens, placeholders, stop strings.

        Each turn's pictures, then its sounds, go before its text, a :data:`MARKER` each.

        Raises:
            PictureError: the model cannot see, or a picture cannot be read.
            SoundError: the model cannot hear, or a sound cannot be read.
            ProjectorError: libmtmd refused the prompt.
            ContextOverflowError: the prompt does not fit a sequence's context.
        """
        projector = self._projector
        if any(m.get("pictures") for m in messages) and (projector is None or not projector.sees):
            raise PictureError(_CANNOT_SEE)
        if projector is None or (any(m.get("sounds") for m in messages) and not projector.hears):
            raise SoundError(_CANNOT_HEAR)
        items = [item for message in messages for item in _media(message)]
        marked: list[ChatMessage] = [
            {"role": message["role"], "content": MARKER * len(_media(message)) + message["content"]}
            for message in messages
        ]
        text, stop_strings, add_bos = self._format.render(marked, stop)
        media = projector.prompt(text, items, add_special=add_bos)
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
        """Put the picture or sound chunk starting at ``position`` into ``sequence`` (batch).

        The reply's Stop reaches the encoder while it runs. Returns llama_decode's code and
        how many positions the chunk filled.
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
        """What puts the picture or sound chunk starting at a position into ``sequence``.

        See :meth:`KvSequence.prefill`. While the encoder runs, the report says ``looking``
        (a picture) or ``listening`` (a sound); an item encoded for this prompt (not found
        kept) counts once in ``pictures_encoded`` or ``sounds_encoded``, whatever its chunks.
        """
        projector = self._projector
        assert projector is not None
        ctx = self._ctx

        def feed(position: int) -> tuple[int, int]:
            run = media.run_at(position)
            if run is None:
                return _NO_PICTURE, 0
            sound = run.is_sound
            new = run.media.digest not in media.encoded
            if sound:
                report.listening = True
            else:
                report.looking = True
            try:
                embeddings = projector.embeddings(media, run)
            except EncodeStoppedError:
                return DECODE_ABORTED, 0
            finally:
                report.looking = report.listening = False
                if new and run.media.digest in media.encoded:
                    if sound:
                        report.sounds_encoded += 1
                    else:
                        report.pictures_encoded += 1
            code = projector.decode(
                ctx, media, run, embeddings, sequence.seq_id, sequence.position(run.start)
            )
            return code, run.length

        return feed


def _media(message: ChatMessage) -> tuple[Media, ...]:
    """A turn's pictures, then its sounds: the order their markers take before its text."""
    return (*message.get("pictures", ()), *message.get("sounds", ()))


def _nothing() -> None:
    """Nothing to undo (a model without a projector)."""
