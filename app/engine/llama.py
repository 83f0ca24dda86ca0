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

from app.engine.backend import (
    ChatMessage,
    EngineOptions,
    GenerationReport,
    GenerationSettings,
    ModelInfo,
)
from app.engine.errors import QT_TRANSLATE_NOOP, ModelLoadError, Sentence
from app.engine.model_file import check_model_file
from app.engine.stop import StopSignal

log = logging.getLogger(__name__)

ABORTED = "llama_decode returned 2"
"""What llama-cpp-python raises when the abort callback ended a llama_decode."""

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


class LlamaBackend:
    """A GGUF model opened with llama.cpp. Used by the worker thread only."""

    def __init__(self, llm: llama_cpp.Llama, path: Path) -> None:
        self._llm = llm
        self._abort = NativeAbortFlag()
        llama_cpp.llama_set_abort_callback(llm._ctx.ctx, self._abort.callback, self._abort.data)
        metadata: dict[str, str] = llm.metadata
        self._info = ModelInfo(
            path=path,
            # The file name is what the user chose and recognises; general.name is often a
            # training-run label ("Smollm2 135M 8k Lc100K Mix1 Ep2").
            name=path.stem,
            n_ctx=llm.n_ctx(),
            has_chat_template="tokenizer.chat_template" in metadata,
            chat_format=str(llm.chat_format),
        )

    @property
    def info(self) -> ModelInfo:
        """Metadata of the open model."""
        return self._info

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
        (prefill or decode); the check after each piece ends the loop between tokens; and a
        Stop set before this started is applied to the flag at once.
        """
        flag = self._abort
        flag.lower()
        remove_listener = stop.add_listener(flag.raise_flag)
        try:
            # With stream=True the result is the chunk iterator; the library's return type is a
            # union that does not narrow on the flag, and chunks are read as plain dicts.
            chunks = cast(
                Generator[dict[str, Any], None, None],
                self._llm.create_chat_completion(
                    messages=cast(Any, list(messages)),
                    stream=True,
                    temperature=settings.temperature,
                    top_p=settings.top_p,
                    top_k=settings.top_k,
                    min_p=settings.min_p,
                    repeat_penalty=settings.repeat_penalty,
                    max_tokens=settings.max_tokens,
                    seed=settings.seed,
                ),
            )
            try:
                for chunk in chunks:
                    choice = chunk["choices"][0]
                    text: str | None = choice["delta"].get("content")
                    if text:
                        report.pieces += 1
                        yield text
                    if choice.get("finish_reason") == "length":
                        report.finish = "length"
                    if stop.is_set():
                        break
            finally:
                chunks.close()
        except RuntimeError as exc:
            if not (str(exc) == ABORTED and stop.is_set()):
                report.finish = "error"
                report.error = Sentence(
                    QT_TRANSLATE_NOOP("Floodgate", "The model failed: {reason}"), {"reason": exc}
                )
        except ValueError as exc:
            # llama-cpp-python raises ValueError when the prompt exceeds the context window.
            report.finish = "error"
            report.error = Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The conversation is too long for this model's context of {n_ctx} tokens "
                    "({reason}). Start a new chat or shorten the prompt.",
                ),
                {"n_ctx": self._info.n_ctx, "reason": exc},
            )
        finally:
            report.compute_ended_at = time.perf_counter()
            remove_listener()
            flag.lower()
        if stop.is_set() and report.finish != "error":
            report.finish = "stopped"

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` as this model reads it (no BOS)."""
        tokens: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=False)
        return tokens

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is for this model."""
        return len(self.tokenize(text))

    def close(self) -> None:
        """Uninstall the abort callback, then free the context and the weights."""
        llama_cpp.llama_set_abort_callback(
            self._llm._ctx.ctx, llama_cpp.ggml_abort_callback(), None
        )
        self._llm.close()


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
    return LlamaBackend(llm, path)
