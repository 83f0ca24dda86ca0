"""One reply in a batch of replies decoded side by side (:mod:`app.engine.batch`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import llama_cpp

from app.engine.backend import ChatMessage, GenerationReport, GenerationSettings
from app.engine.draft import Drafter
from app.engine.generation import StopStrings, TokenPieces, held_back, new_text_decoder
from app.engine.projector import MediaPrompt
from app.engine.sequence import ChunkSizer, KvSequence
from app.engine.stop import StopSignal


class BatchedReply:
    """One reply in the batch: what was asked, who reads it, where it stands, what it shows.

    The batch (:class:`~app.engine.batch.BatchDecoder`) decodes each step; the reply samples
    its next token from the step's output, shows its text to its reader or holds it, and
    ends itself when its text ends.

    Args:
        messages: the turns to answer.
        settings: how to sample.
        stop: the reply's stop signal.
        report: filled in as the reply goes (read live by the window and the server panel).
        offer: hands a piece to the reader without waiting; False when the reader has no
            room for it (the batch holds it, and asks the reader's wake-up to come back).
        ended: called once, on the batch's thread, when the reply is over however it ended.
        conversation: the conversation's id (processed prompts are kept per id).
        plain: a plain text to continue instead of ``messages`` (the API's completions).
    """

    def __init__(
        self,
        messages: Sequence[ChatMessage],
        settings: GenerationSettings,
        stop: StopSignal,
        report: GenerationReport,
        offer: Callable[[str], bool],
        ended: Callable[[], None],
        *,
        conversation: str = "",
        plain: str | None = None,
    ) -> None:
        self.messages = messages
        self.settings = settings
        self.stop = stop
        self.report = report
        self.offer = offer
        self.ended = ended
        self.conversation = conversation
        self.plain = plain
        self.sequence: KvSequence | None = None
        self.prompt: list[int] = []
        self.media: MediaPrompt | None = None
        """Its prompt's pictures and sounds (None: text only), freed when it ends."""
        self.sampler: Any = None
        self.stops = StopStrings(())
        self.decoder = new_text_decoder()
        self.sizer: ChunkSizer | None = None
        """Sizes its prompt's chunks while nothing else decodes."""
        self.sizer_beside: ChunkSizer | None = None
        """Sizes them while other replies stream: each its own sizer, as chunks beside
        decoding replies are small and cost more per token (a call's fixed part)."""
        self.pending: int | None = None
        """The last token sampled, which the next step decodes (None: reading the prompt)."""
        self.held = ""
        """Text its reader had no room for: the reply waits out of the batch until taken."""
        self.held_since = 0.0
        self.ending = False
        """It ended by itself (end of text, a stop string, its length); held text goes first."""
        self.drafter: Drafter | None = None
        """Its proposals (None: it does not draft)."""
        self.draft: list[int] = []
        """Proposed tokens to check after ``pending`` in its next step."""
        self.checked: list[int] = []
        """Proposed tokens decoded in its last step and not sampled yet: each kept while it
        equals the token sampled from the row before it."""
        self.generated = 0
        self.generated_from = 0
        self.limit = 0
        self.room = 0
        self._remove_listener: Callable[[], None] | None = None
        self.outside = 0.0
        """Seconds of the current step in the sampler and with its reader (not the engine's
        own Python): :func:`share_python` takes them out of the step's time."""
        self.python = 0.0
        """Seconds of the worker's Python spent on it: its share of each step's."""

    @property
    def reading_prompt(self) -> bool:
        """Whether its prompt is still being processed."""
        return self.pending is None and not self.ending

    def begin(
        self,
        prompt: list[int],
        stop_strings: tuple[str, ...],
        drafter: Drafter | None,
        kept: int,
        n_ctx: int,
    ) -> None:
        """Its prompt is rendered and its sequence holds ``kept`` of it: the reply begins.

        Args:
            prompt: the prompt's token ids (a picture's positions hold placeholders).
            stop_strings: the template's strings that end the reply (the settings' are added).
            drafter: its proposals (None: it does not draft).
            kept: the prompt tokens its sequence holds already.
            n_ctx: a sequence's context, which the prompt and the reply share.
        """
        report = self.report
        self.prompt = prompt
        self.stops = StopStrings(stop_strings + self.settings.stop)
        self.drafter = drafter
        report.cached_tokens = kept
        report.prefill_done = kept
        report.prefill_started_at = time.perf_counter()
        self.room = n_ctx - len(prompt)
        max_tokens = self.settings.max_tokens
        self.limit = min(max_tokens, self.room) if max_tokens > 0 else self.room

    def listen_for_stop(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when its Stop is set, until :meth:`stop_listening`."""
        self._remove_listener = self.stop.add_listener(listener)

    def stop_listening(self) -> None:
        """Its Stop no longer calls the listener (it is leaving the batch)."""
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None

    def advance(self, ctx: Any, vocab: Any, pieces: TokenPieces, index: int, beside: int) -> bool:
        """Sample the next token from the step's output ``index``; show its text.

        While the token sampled is the next of the reply's checked proposals, that one was
        decoded already: the token after it is sampled from the next row, through the same
        checks. The first that differs is decoded at the next step, with a new draft, sized
        by the ``beside`` replies decoding with it.

        Returns:
            True when it ended by itself and its reader has all of it: it leaves the batch.
        """
        sequence = self.sequence
        assert sequence is not None
        drafter = self.drafter
        report = self.report
        while True:
            began = time.perf_counter()
            token = int(llama_cpp.llama_sampler_sample(self.sampler, ctx, index))
            self.outside += time.perf_counter() - began
            if drafter is not None:
                drafter.saw(token)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                return self._finish("done")
            self.generated += 1
            report.reply_tokens = self.generated
            piece = pieces.known.get(token)
            if piece is None:
                piece = pieces(token)
            text: str = self.decoder.decode(piece)
            if self.stops.stops and text:
                text = self.stops.feed(text)
            if text:
                report.pieces += 1
                self.hand(text)
            if self.stops.hit:
                return self._finish("done")
            if self.generated >= self.limit and (
                self.generated >= min(self.room, self.limit + 3) or not self.decoder.getstate()[0]
            ):
                return self._finish("length")
            checked = self.checked
            if checked and token == checked[0] and not self.stop.is_set():
                del checked[0]
                sequence.tokens.append(token)
                report.draft_kept += 1
                index += 1
                continue
            self.forget_checked()
            self.pending = token
            if drafter is not None and not self.stop.is_set():
                most = min(self.limit, self.room) - self.generated
                self.draft = drafter.draft(most, beside)
            return False

    def _finish(self, finish: str) -> bool:
        """It ended by itself: what was held back goes to the reader; True if it took all."""
        self.report.finish = "length" if finish == "length" else "done"
        self.ending = True
        self.pending = None
        tail = held_back(self.decoder, self.stops)
        if tail:
            self.report.pieces += 1
            self.hand(tail)
        return not self.held

    def leave(self) -> None:
        """It leaves the batch: no more Stop listening, proposals or pauses; media freed."""
        self.stop_listening()
        # Proposals not kept when it ended (a Stop, the end of text, a stop string, its length).
        self.forget_checked()
        self.draft = []
        self.report.paused = False
        self.pending = None
        if self.media is not None:
            self.media.close()
            self.media = None

    def forget_checked(self) -> None:
        """Drop the KV of its checked proposals that were not kept."""
        if self.checked:
            self.checked = []
            if self.sequence is not None:
                self.sequence.discard_uncounted()

    def hand(self, text: str) -> None:
        """Give ``text`` to the reader, or hold it (the reply waits out of the batch)."""
        if self.held:
            self.held += text
            return
        began = time.perf_counter()
        taken = self.offer(text)
        now = time.perf_counter()
        self.outside += now - began
        if not taken:
            self.held = text
            self.held_since = now
            self.report.paused = True

    def add_python(self, seconds: float) -> None:
        """Count its share of a step's Python (:func:`share_python`); report it per token.

        As alone (:func:`~app.engine.generation.decode_reply`): the time outside
        ``llama_decode``, the sampler and the reader, per token it generated.
        """
        self.python += seconds
        self.outside = 0.0
        if self.generated:
            self.report.python_ms_per_token = self.python * 1000.0 / self.generated

    def hand_held(self) -> bool:
        """Offer the held text to the reader again; True if it took it."""
        if self.stop.is_set() or not self.offer(self.held):
            return False
        self.held = ""
        self.report.paused = False
        self.report.paused_seconds += time.perf_counter() - self.held_since
        return True


def share_python(replies: Sequence[BatchedReply], seconds: float) -> None:
    """Share a step's Python by the replies it decoded, equally.

    ``seconds``: the step's time outside ``llama_decode``; the replies' time in the sampler
    and with their readers (their ``outside``) is not the engine's Python.
    """
    python = max(0.0, seconds - sum(reply.outside for reply in replies)) / len(replies)
    for reply in replies:
        reply.add_python(python)
