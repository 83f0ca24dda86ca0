"""The llama.cpp engine (llama-cpp-python), with Stop wired into the computation itself."""

from __future__ import annotations

import ctypes
import logging
import platform
import sys
import time
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any, cast

import llama_cpp
from llama_cpp import llama_chat_format

from app.engine.backend import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    ModelInfo,
)
from app.engine.chat_template import ChatTemplate, TemplateError
from app.engine.errors import QT_TRANSLATE_NOOP, ModelLoadError, Sentence
from app.engine.generation import (
    DECODE_ABORTED,
    DecodeFailedError,
    SamplerChain,
    StopStrings,
    TokenPieces,
    decode_reply,
)
from app.engine.model_card import CHAT_TEMPLATE_KEY, read_chat_template
from app.engine.model_file import check_model_file
from app.engine.prompt_cache import CacheStats, ModelIdentity, PromptCache, read_sequence
from app.engine.sequence import KvSequence, common_prefix
from app.engine.stop import StopSignal

log = logging.getLogger(__name__)

# Returning a size_t where llama.cpp expects a bool is sound where the C calling convention
# hands back the bool in the low byte of the integer return register (x86-64 and arm64).
_STRLEN_IS_BOOL_SAFE = platform.machine().lower() in {"x86_64", "amd64", "arm64", "aarch64"}


def _forward_native_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    # llama.cpp logs at ERROR on every aborted decode ("removing memory module entries"),
    # which is what Stop is meant to do; its real failures reach us as exceptions. So its log
    # goes to Python logging at DEBUG (``floodgate --debug`` shows it), not to the terminal.
    log.debug("llama.cpp: %s", text.decode("utf-8", "replace").rstrip())


# Installed once, at import; the module keeps the callback object alive.
_native_log_callback = llama_cpp.llama_log_callback(_forward_native_log)
llama_cpp.llama_log_set(_native_log_callback, ctypes.c_void_p(0))


class NativeAbortFlag:
    """A stop flag that llama.cpp's abort callback reads without taking the GIL.

    llama.cpp calls the abort callback after every graph node (about 600 times per token for
    a small model) on the computing thread. A Python callback would take the GIL each time and
    slow inference by 20-50 % whenever the UI thread is busy (shared/design.md). Instead the
    callback is libc's ``strlen`` over a two-byte buffer: it returns 0 while the buffer is
    empty and 1 once :meth:`raise_flag` writes a byte into it. No Python runs during decode.

    The buffer and the callback object must outlive their installation; this object owns
    both, and the backend keeps it for the life of the llama context.
    """

    def __init__(self) -> None:
        self._buffer = ctypes.create_string_buffer(2)
        self.data = ctypes.cast(self._buffer, ctypes.c_void_p)
        self.native = _STRLEN_IS_BOOL_SAFE
        self.callback: Any
        if self.native:
            strlen = (
                ctypes.CDLL(None).strlen if sys.platform != "win32" else ctypes.cdll.msvcrt.strlen
            )
            self.callback = ctypes.cast(strlen, llama_cpp.ggml_abort_callback)
        else:  # pragma: no cover - other architectures: correct, but takes the GIL per node
            self.callback = llama_cpp.ggml_abort_callback(lambda _data: self.raised)

    def raise_flag(self) -> None:
        """Make the next abort check return true."""
        self._buffer[0] = b"\x01"

    def lower(self) -> None:
        """Make abort checks return false again."""
        self._buffer[0] = b"\x00"

    @property
    def raised(self) -> bool:
        """Whether the flag is raised."""
        return self._buffer[0] != b"\x00"

    def check(self) -> bool:
        """Call the callback exactly as llama.cpp does (for tests)."""
        return bool(self.callback(self.data))


class _Prompt:
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


class LlamaBackend:
    """A GGUF model opened with llama.cpp. Used by the worker thread only.

    Replies are generated by Floodgate's own loop over llama.cpp's C API
    (:mod:`app.engine.generation`); llama-cpp-python's ``Llama`` only loads the model and the
    context and reads the metadata. The engine keeps the token ids of sequence 0's KV cache
    (:class:`KvSequence`), so a new prompt reuses the longest shared prefix in place, a
    stopped prompt resumes where it stopped, and, with a :class:`PromptCache`, a conversation
    that comes back is restored rather than processed again.

    Args:
        llm: the loaded model and context.
        path: the model file.
        options: how it was opened (chunked prefill, n_batch).
        cache: where processed prompts are kept per conversation (None: nowhere).
    """

    def __init__(
        self,
        llm: llama_cpp.Llama,
        path: Path,
        options: EngineOptions | None = None,
        cache: PromptCache | None = None,
    ) -> None:
        options = options or EngineOptions()
        self._llm = llm
        self._options = options
        self._cache = cache
        ctx = llm.ctx
        self._ctx = ctx
        self._abort = NativeAbortFlag()
        llama_cpp.llama_set_abort_callback(ctx, self._abort.callback, self._abort.data)
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._n_ctx = llm.n_ctx()
        self._sequence = KvSequence(ctx, int(llama_cpp.llama_n_batch(ctx)))
        self._sampler = SamplerChain(llm.n_vocab())
        self._pieces = TokenPieces(self._vocab)
        self._prompt = _Prompt(llm, path)
        self._closed = False
        self._info = ModelInfo(
            path=path,
            # The file name is what the user chose and recognises; general.name is often a
            # training-run label ("Smollm2 135M 8k Lc100K Mix1 Ep2").
            name=path.stem,
            n_ctx=self._n_ctx,
            has_chat_template=self._prompt.has_template,
            chat_format=self._prompt.chat_format,
        )

    @property
    def info(self) -> ModelInfo:
        """Metadata of the open model."""
        return self._info

    @property
    def sequence(self) -> KvSequence:
        """The KV cache of sequence 0 and the token ids it holds (for tests and the bench)."""
        return self._sequence

    def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        settings: GenerationSettings,
        stop: StopSignal,
        report: GenerationReport,
        *,
        conversation: str = "",
    ) -> Generator[str, None, None]:
        """Stream a chat reply through the model's own chat template.

        Stop is seen three ways: llama.cpp's abort callback ends a llama_decode in progress
        (prompt chunk or token); the check after each token ends the loop between tokens;
        and a Stop set before this started is applied to the flag at once.
        """
        flag = self._abort
        flag.lower()
        remove_listener = stop.add_listener(flag.raise_flag)
        try:
            yield from self._reply(messages, settings, stop, report, conversation)
        except TemplateError as exc:
            if not exc.stopped:
                report.finish = "error"
                report.error = exc.sentence
        except _ContextOverflowError as exc:
            report.finish = "error"
            report.error = Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The conversation is too long for this model's context of {n_ctx} tokens "
                    "({reason}). Start a new chat or shorten the prompt.",
                ),
                {"n_ctx": self._n_ctx, "reason": exc},
            )
        except DecodeFailedError as exc:
            report.finish = "error"
            report.error = Sentence(
                QT_TRANSLATE_NOOP("Floodgate", "The model failed: {reason}"), {"reason": exc}
            )
        finally:
            report.compute_ended_at = time.perf_counter()
            remove_listener()
            flag.lower()
        if stop.is_set() and report.finish != "error":
            report.finish = "stopped"

    def _reply(
        self,
        messages: Sequence[ChatMessage],
        settings: GenerationSettings,
        stop: StopSignal,
        report: GenerationReport,
        conversation: str,
    ) -> Generator[str, None, None]:
        text, stop_strings, add_bos = self._prompt.render(messages, stop)
        prompt: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
        n_ctx = self._n_ctx
        if len(prompt) >= n_ctx:
            # llama-cpp-python's own words for it, which the sentence quotes.
            raise _ContextOverflowError(
                f"Requested tokens ({len(prompt)}) exceed context window of {n_ctx}"
            )
        report.prompt_tokens = len(prompt)
        if stop.is_set():
            return
        sequence = self._sequence
        self._take_back_context()
        kept = self._prepare(prompt, conversation, report)
        report.cached_tokens = kept
        report.prefill_done = kept
        report.prefill_started_at = time.perf_counter()
        code = sequence.prefill(prompt, report, self._options.prefill_chunk_seconds)
        if code == 0:
            report.prefill_ended_at = time.perf_counter()
        else:
            self._keep(conversation)
            if code == DECODE_ABORTED and stop.is_set():
                return
            if code == 1:
                raise _ContextOverflowError(
                    f"no room in the KV cache (llama_decode returned {code})"
                )
            raise DecodeFailedError(code)
        room = n_ctx - len(prompt)
        limit = min(settings.max_tokens, room) if settings.max_tokens > 0 else room
        generated_from = len(sequence.tokens)
        try:
            yield from decode_reply(
                ctx=self._ctx,
                vocab=self._vocab,
                sampler=self._sampler.prepare(settings),
                pieces=self._pieces,
                stops=StopStrings(stop_strings),
                kv_tokens=sequence.tokens,
                limit=limit,
                room=room,
                stop=stop,
                report=report,
            )
        finally:
            if not sequence.in_step():
                sequence.clear()
            elif not self._options.reuse_reply_tokens:
                # Computed one by one, the reply's tokens are not exactly what processing
                # them within the next prompt gives: that prompt processes them again.
                sequence.trim(generated_from)
            elif sequence.rate:
                # What processing the reply's tokens as part of the next prompt would cost.
                sequence.seconds += (len(sequence.tokens) - generated_from) / sequence.rate
            self._keep(conversation, at_end=True)

    def _take_back_context(self) -> None:
        """Forget the KV record if llama-cpp-python's own API used the context meanwhile.

        The bench runs llama-cpp-python's ``create_chat_completion`` on this same context as
        its baseline; that changes the KV cache without this engine knowing. Its own count of
        evaluated tokens is 0 while only this engine computes.
        """
        if self._llm.n_tokens:
            self._llm.n_tokens = 0
            self._sequence.clear()
            self._sequence.conversation = None

    def _prepare(self, prompt: list[int], conversation: str, report: GenerationReport) -> int:
        """Make sequence 0 hold the longest prefix of ``prompt`` it can get without computing.

        The prefix shared in place, a state from the prompt cache, or (when the oldest turns
        were left out) the held tokens shifted down over them. At least the last prompt token
        is always left to process, for its logits. Returns how many tokens are held.
        """
        sequence = self._sequence
        cache = self._cache
        if not sequence.in_step():
            sequence.clear()
        held = sequence.tokens
        # The last prompt token is always processed again, for its logits, and with the one
        # before it: a token computed alone comes out slightly different (see prefill).
        reuse = max(0, min(common_prefix(held, prompt), len(prompt) - 2))
        switching = sequence.conversation is not None and sequence.conversation != conversation
        # Keep what is about to be lost: another conversation's prompt, or this one's branch
        # (a regenerated reply, an edited prompt) when a good part of it would go.
        if cache is not None and held and (switching or len(held) - reuse >= _KEEP_DISCARDED):
            self._keep(sequence.conversation or conversation)
        continuing = sequence.conversation == conversation and reuse == len(held)
        if cache is not None and conversation and not continuing:
            hit = cache.lookup(conversation, prompt, longer_than=reuse)
            if hit is not None:
                usable = min(common_prefix(hit.tokens, prompt), len(prompt) - 2)
                if usable > reuse:
                    if sequence.restore(hit.tokens, usable, hit.saved_seconds, hit.state):
                        sequence.conversation = conversation
                        report.prefix_source = hit.source
                        report.saved_seconds = hit.saved_seconds
                        log.debug("Prompt cache: %d tokens from %s", usable, hit.source)
                        return usable
                    log.warning("Prompt cache: llama.cpp refused a saved state; processing")
                    reuse = 0
        if report.dropped_turns and reuse < len(held) and not switching:
            # The oldest turns were left out: shift the kept ones down over them.
            shifted = sequence.shift_for(prompt)
            if shifted:
                sequence.trim(min(shifted, len(prompt) - 2))
                sequence.conversation = conversation
                report.prefix_source = "shift"
                report.saved_seconds = sequence.seconds
                return len(sequence.tokens)
        sequence.trim(reuse)
        sequence.conversation = conversation
        if sequence.tokens:
            report.prefix_source = "kept"
            report.saved_seconds = sequence.seconds
        return len(sequence.tokens)

    def _keep(self, conversation: str | None, *, at_end: bool = False) -> None:
        """Hand sequence 0 to the prompt cache as ``conversation``'s.

        At the end of a reply, only when it cost enough to be worth writing to disk (the
        cache keeps every conversation's newest state in RAM anyway when it is put before
        being replaced).
        """
        sequence = self._sequence
        if self._cache is None or not conversation or not sequence.tokens:
            return
        if at_end and sequence.seconds < _DISK_WORTHY_SECONDS:
            return
        if sequence.shifted:
            # Shifted KV entries are close to, not exactly, what these tokens give when
            # processed: the cache only holds states that restore exactly.
            return
        if not sequence.in_step():
            return
        self._cache.put(
            conversation, tuple(sequence.tokens), read_sequence(self._ctx, 0), sequence.seconds
        )

    def forget(self, conversation: str) -> None:
        """Drop everything kept of ``conversation`` (it was deleted)."""
        if self._sequence.conversation == conversation:
            self._sequence.conversation = None
        if self._cache is not None:
            self._cache.forget(conversation)

    def clear_cache(self) -> None:
        """Drop every kept prompt, in RAM and on disk (the "Clear cache" action)."""
        if self._cache is not None:
            self._cache.clear()

    def cache_stats(self) -> CacheStats | None:
        """The prompt cache's figures, or None when there is no cache."""
        return self._cache.stats() if self._cache is not None else None

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` as this model reads it (no BOS)."""
        tokens: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=False)
        return tokens

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is for this model."""
        return len(self.tokenize(text))

    def close(self) -> None:
        """Free the sampler, the cache, the abort callback, then the context and the weights."""
        if self._closed:
            return
        self._closed = True
        self._sampler.close()
        if self._cache is not None:
            self._cache.close()
        llama_cpp.llama_set_abort_callback(self._ctx, llama_cpp.ggml_abort_callback(), None)
        self._llm.close()


_KEEP_DISCARDED = 64
"""Tokens of this conversation that must be about to go before their state is kept first."""

_DISK_WORTHY_SECONDS = 2.0
"""A state that took this long to compute is kept at the end of each reply, for the disk."""

_MIB = 1024 * 1024


class _ContextOverflowError(Exception):
    """The prompt does not fit in the context."""


def open_llama(path: Path, options: EngineOptions) -> LlamaBackend:
    """Open a GGUF file; raise :class:`ModelLoadError` with a sentence for the user."""
    check_model_file(path)
    try:
        llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=options.n_ctx,
            n_threads=options.n_threads,
            n_threads_batch=options.n_threads,
            n_batch=options.n_batch,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelLoadError(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "{name} could not be loaded: the file may be truncated, damaged, or made for "
                "a newer llama.cpp. ({reason})",
            ),
            name=path.name,
            reason=exc,
        ) from exc
    cache: PromptCache | None = None
    if options.cache_ram_mb > 0 or options.cache_dir is not None:
        try:
            identity = ModelIdentity.of(path, llm.n_ctx())
        except OSError as exc:  # the file was readable a moment ago; run without a cache
            log.warning("Prompt cache off: %s", exc)
        else:
            cache = PromptCache(
                identity,
                ram_budget=options.cache_ram_mb * _MIB,
                disk_dir=options.cache_dir,
                disk_budget=options.cache_disk_mb * _MIB,
                disk_min_seconds=_DISK_WORTHY_SECONDS,
            )
    return LlamaBackend(llm, path, options, cache)
