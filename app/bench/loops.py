"""The references for speed: llama-cpp-python without Floodgate, high-level and as lean as can be.

- ``raw``: llama-cpp-python's own ``create_chat_completion(stream=True)`` loop.
- ``native``: the leanest decode loop over llama-cpp-python's low-level C API (one
  ``llama_decode`` per token, a greedy ``llama_sampler``, ``llama_token_to_piece``, an
  incremental UTF-8 decoder): no UI, no queue, no stop checks. The practical limit.
- prompt processing: llama-cpp-python's ``Llama.eval`` of the templated prompt's tokens on an
  empty cache, in ``n_batch`` chunks, as it does before every reply.

All three share one ``Llama`` opened with the app's context and batch; the thread counts are
set before each run. They run in a bare child process (:mod:`app.bench.bare`), never beside
the app's worker.
"""

from __future__ import annotations

import codecs
import ctypes
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import llama_cpp
from llama_cpp import llama_chat_format

from app.engine import ChatMessage, EngineOptions
from app.engine.devices import load_backends


class LlamaLoops:
    """One ``Llama`` and the reference loops over it. Used from one thread at a time."""

    def __init__(
        self, model: Path, options: EngineOptions, max_tokens: int, n_gpu_layers: int = 0
    ) -> None:
        # A build of backend modules: the GPU's is loaded only for a GPU reference, so that
        # the CPU references run on the CPU alone (a visible GPU would otherwise be sent
        # llama.cpp's batched operations: op_offload).
        load_backends(gpu=n_gpu_layers != 0)
        self.llm = llama_cpp.Llama(
            model_path=str(model),
            n_ctx=options.n_ctx,
            n_threads=options.n_threads or None,
            n_threads_batch=options.n_threads_batch or None,
            n_batch=options.n_batch,
            n_gpu_layers=n_gpu_layers,
            verbose=False,
        )
        self.max_tokens = max_tokens
        self.threads, self.threads_batch = self.llm.n_threads, self.llm.n_threads_batch
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm._model.model)
        llm = self.llm
        self._formatter = llama_chat_format.Jinja2ChatFormatter(
            template=str(llm.metadata.get("tokenizer.chat_template", "")),
            eos_token=llm.detokenize([llm.token_eos()]).decode("utf-8", "replace"),
            bos_token=llm.detokenize([llm.token_bos()]).decode("utf-8", "replace"),
        )

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The prompt as the model reads it: the GGUF's chat template, then the tokenizer.

        The same tokens ``create_chat_completion`` feeds the model for a GGUF with a template.
        """
        rendered = self._formatter(messages=cast(Any, list(messages)))
        tokens: list[int] = self.llm.tokenize(
            rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
        )
        return tokens

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        """Decode on ``n_threads`` and process prompts on ``n_threads_batch`` from now on."""
        if (n_threads, n_threads_batch) != (self.threads, self.threads_batch):
            llama_cpp.llama_set_n_threads(self.llm._ctx.ctx, n_threads, n_threads_batch)
            self.threads, self.threads_batch = n_threads, n_threads_batch

    def count_tokens(self, text: str) -> int:
        """The model's token count of ``text`` (no BOS)."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False))

    def raw_run(self, messages: Sequence[ChatMessage]) -> tuple[float, list[str]]:
        """llama-cpp-python's own streaming loop: tokens per second and the pieces it streamed."""
        times: list[float] = []
        pieces: list[str] = []
        for chunk in self.llm.create_chat_completion(
            messages=cast(Any, list(messages)),
            stream=True,
            temperature=0.0,
            max_tokens=self.max_tokens,
        ):
            text: str | None = chunk["choices"][0]["delta"].get("content")  # type: ignore[index,union-attr,assignment]
            if text:
                times.append(time.perf_counter())
                pieces.append(text)
        return _rate(times), pieces

    def native_run(self, tokens: Sequence[int]) -> float:
        """The leanest greedy loop over the C API, after processing ``tokens``: tokens per second.

        Times each token as its text is ready, like the other loops, so prompt processing is
        not part of the rate.
        """
        llm, vocab = self.llm, self._vocab
        ctx = llm._ctx.ctx
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        llm.reset()  # type: ignore[no-untyped-call]  # its record of the cache no longer holds
        prompt = (llama_cpp.llama_token * len(tokens))(*tokens)
        one = (llama_cpp.llama_token * 1)()
        buffer = ctypes.create_string_buffer(256)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        sampler = llama_cpp.llama_sampler_init_greedy()
        times: list[float] = []
        text: list[str] = []
        try:
            _decode(ctx, llama_cpp.llama_batch_get_one(prompt, len(tokens)))
            for _ in range(self.max_tokens):
                token = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    break
                size = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, False)
                text.append(utf8.decode(buffer.raw[:size]))
                times.append(time.perf_counter())
                one[0] = token
                _decode(ctx, llama_cpp.llama_batch_get_one(one, 1))
        finally:
            llama_cpp.llama_sampler_free(sampler)
        return _rate(times)

    def prefill_run(self, tokens: Sequence[int]) -> float:
        """llama-cpp-python processing ``tokens`` on an empty cache: tokens per second."""
        self.llm.reset()  # type: ignore[no-untyped-call]
        began = time.perf_counter()
        self.llm.eval(tokens)
        return len(tokens) / (time.perf_counter() - began)

    def close(self) -> None:
        """Free the model."""
        self.llm.close()


def _decode(ctx: llama_cpp.llama_context_p, batch: llama_cpp.llama_batch) -> None:
    status = llama_cpp.llama_decode(ctx, batch)
    if status != 0:
        raise RuntimeError(f"llama_decode returned {status}")


def _rate(times: list[float]) -> float:
    if len(times) < 2 or times[-1] <= times[0]:
        raise RuntimeError("the reply was too short to have a rate")
    return (len(times) - 1) / (times[-1] - times[0])
