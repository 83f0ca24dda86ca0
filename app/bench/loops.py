"""The references for speed: llama-cpp-python without Floodgate, high-level and as lean as can be.

- ``raw``: llama-cpp-python's own ``create_chat_completion(stream=True)`` loop.
- ``native``: the leanest decode loop over llama-cpp-python's low-level C API (one
  ``llama_decode`` per token, a greedy ``llama_sampler``, ``llama_token_to_piece``, an
  incremental UTF-8 decoder): no UI, no queue, no stop checks. The practical limit.
- prompt processing: llama-cpp-python's ``Llama.eval`` of the templated prompt's tokens on an
  empty cache, in ``n_batch`` chunks, as it does before every reply.
- ``batch``: several sequences decoded side by side, as lean as ``native``: a context of their
  own (``n_seq_max`` of them, a KV cache stream each), every prompt read in one
  ``llama_decode``, then one ``llama_decode`` per step holding each sequence's next token, a
  greedy sampler per sequence, ``llama_token_to_piece`` and a UTF-8 decoder per sequence.

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
from app.engine.generation import put_token


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
            flash_attn=options.flash_attn,
            verbose=False,
        )
        self._model, self._options = model, options
        self._lookup: llama_cpp.Llama | None = None
        self.max_tokens = max_tokens
        self.threads, self.threads_batch = self.llm.n_threads, self.llm.n_threads_batch
        self._batch_ctx: tuple[tuple[int, int], Any] | None = None
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

    def plain_tokens(self, text: str) -> list[int]:
        """A plain text as the engine reads one to continue (``ReplyPrompts.render_text``)."""
        tokens: list[int] = self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
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
        return _streamed(self.llm, messages, temperature=0.0, max_tokens=self.max_tokens)

    def lookup_run(self, messages: Sequence[ChatMessage], threads: int) -> tuple[float, str]:
        """llama-cpp-python's prompt lookup, greedy: tokens per second and the text.

        Its draft model proposes 10 tokens, as its documentation shows. A ``Llama`` of its own
        (the draft model is given when it is made), kept for the next run.
        """
        if self._lookup is None:
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            options = self._options
            self._lookup = llama_cpp.Llama(
                model_path=str(self._model),
                n_ctx=options.n_ctx,
                n_threads=threads,
                n_threads_batch=self.threads_batch,
                n_batch=options.n_batch,
                flash_attn=options.flash_attn,
                draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10),
                # Said outright: with a draft model it keeps every row of logits, but sizes
                # their array from this flag (n_batch rows without it: a longer context
                # overflows it, "could not broadcast input array").
                logits_all=True,
                verbose=False,
            )
        rate, pieces = _streamed(
            self._lookup, messages, temperature=0.0, repeat_penalty=1.0, max_tokens=self.max_tokens
        )
        self._lookup.reset()  # type: ignore[no-untyped-call]  # a fresh prompt each run
        return rate, "".join(pieces)

    def native_run(self, tokens: Sequence[int]) -> float:
        """The leanest greedy loop over the C API, after processing ``tokens``: tokens per second.

        Times each token as its text is ready, like the other loops, so prompt processing is
        not part of the rate.
        """
        llm, vocab = self.llm, self._vocab
        ctx = llm._ctx.ctx
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        llm.reset()  # type: ignore[no-untyped-call]  # its record of the cache no longer holds
        one = (llama_cpp.llama_token * 1)()
        buffer = ctypes.create_string_buffer(256)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        sampler = llama_cpp.llama_sampler_init_greedy()
        times: list[float] = []
        text: list[str] = []
        try:
            # Llama.eval goes in pieces of n_batch: llama_decode aborts the process on more.
            llm.eval(tokens)
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

    def _context_for(self, n_seq: int, n_ctx_seq: int) -> Any:
        """A context for ``n_seq`` sequences of ``n_ctx_seq`` tokens each (kept for the next run).

        Made as the app makes one (:func:`app.engine.loading.for_sequences`): llama-cpp-python's
        own context parameters (those of :attr:`llm`), with ``n_seq_max`` sequences, a KV
        cache stream each (``kv_unified`` off) and ``n_ctx`` for all of them.
        """
        key = (n_seq, n_ctx_seq)
        if self._batch_ctx is not None and self._batch_ctx[0] == key:
            return self._batch_ctx[1]
        self._free_batch_ctx()
        params = llama_cpp.llama_context_params.from_buffer_copy(self.llm.context_params)
        params.n_ctx = n_seq * n_ctx_seq
        params.n_seq_max = n_seq
        params.kv_unified = False
        params.n_threads, params.n_threads_batch = self.threads, self.threads_batch
        ctx = llama_cpp.llama_init_from_model(self.llm._model.model, params)
        if not ctx:
            raise RuntimeError(f"no context for {n_seq} sequences of {n_ctx_seq} tokens")
        self._batch_ctx = (key, ctx)
        return ctx

    def _free_batch_ctx(self) -> None:
        if self._batch_ctx is not None:
            llama_cpp.llama_free(self._batch_ctx[1])
            self._batch_ctx = None

    def batch_run(
        self, prompts: Sequence[Sequence[int]], tokens: int, n_ctx_seq: int
    ) -> list[list[float]]:
        """``prompts`` decoded side by side, greedy, ``tokens`` each (fewer at end of text).

        Returns each sequence's token times (``time.perf_counter()`` as its text is ready),
        so prompt processing is no part of a rate computed from them.
        """
        n_seq = len(prompts)
        ctx = self._context_for(n_seq, n_ctx_seq)
        llama_cpp.llama_set_n_threads(ctx, self.threads, self.threads_batch)
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        vocab = self._vocab
        n_batch = int(llama_cpp.llama_n_batch(ctx))
        total = sum(len(p) for p in prompts)
        if total > n_batch:
            raise ValueError(f"the prompts ({total} tokens) exceed a batch of {n_batch}")
        batch = llama_cpp.llama_batch_init(max(n_batch, n_seq), 0, 1)
        samplers = [llama_cpp.llama_sampler_init_greedy() for _ in prompts]
        decoders = [codecs.getincrementaldecoder("utf-8")(errors="replace") for _ in prompts]
        buffer = ctypes.create_string_buffer(256)
        times: list[list[float]] = [[] for _ in prompts]
        text: list[list[str]] = [[] for _ in prompts]
        positions = [len(p) for p in prompts]
        outputs: list[int] = []  # each live sequence's row of logits in the last step

        try:
            n = 0
            for seq, prompt in enumerate(prompts):
                for pos, token in enumerate(prompt):
                    put_token(batch, n, token, pos, seq, pos == len(prompt) - 1)
                    n += 1
                outputs.append(n - 1)
            batch.n_tokens = n
            _decode(ctx, batch)
            live = list(range(n_seq))
            for _ in range(tokens):
                step: list[int] = []
                n = 0
                for seq, row in zip(live, outputs, strict=True):
                    token = llama_cpp.llama_sampler_sample(samplers[seq], ctx, row)
                    if llama_cpp.llama_vocab_is_eog(vocab, token):
                        continue
                    size = llama_cpp.llama_token_to_piece(
                        vocab, token, buffer, len(buffer), 0, False
                    )
                    text[seq].append(decoders[seq].decode(buffer.raw[:size]))
                    times[seq].append(time.perf_counter())
                    put_token(batch, n, token, positions[seq], seq, True)
                    positions[seq] += 1
                    step.append(seq)
                    n += 1
                if not step:
                    break
                live, outputs = step, list(range(n))
                batch.n_tokens = n
                _decode(ctx, batch)
        finally:
            for sampler in samplers:
                llama_cpp.llama_sampler_free(sampler)
            llama_cpp.llama_batch_free(batch)
        return times

    def close(self) -> None:
        """Free the model (and the context of the batched runs)."""
        self._free_batch_ctx()
        if self._lookup is not None:
            self._lookup.close()
        self.llm.close()


def _decode(ctx: llama_cpp.llama_context_p, batch: llama_cpp.llama_batch) -> None:
    status = llama_cpp.llama_decode(ctx, batch)
    if status != 0:
        raise RuntimeError(f"llama_decode returned {status}")


def _streamed(
    llm: llama_cpp.Llama, messages: Sequence[ChatMessage], **sampling: Any
) -> tuple[float, list[str]]:
    """``create_chat_completion`` streamed: tokens per second and the pieces."""
    times: list[float] = []
    pieces: list[str] = []
    for chunk in llm.create_chat_completion(
        messages=cast(Any, list(messages)), stream=True, **sampling
    ):
        text: str | None = chunk["choices"][0]["delta"].get("content")  # type: ignore[index,union-attr,assignment]
        if text:
            times.append(time.perf_counter())
            pieces.append(text)
    return _rate(times), pieces


def _rate(times: list[float]) -> float:
    if len(times) < 2 or times[-1] <= times[0]:
        raise RuntimeError("the reply was too short to have a rate")
    return (len(times) - 1) / (times[-1] - times[0])
