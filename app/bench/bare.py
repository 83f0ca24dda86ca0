"""The references in a bare child process: no Qt, one thread that ever calls llama.cpp.

llama.cpp's OpenMP build keeps one team of threads per calling thread, and with more of its
threads alive than cores they sleep at every barrier instead of spinning: the references run
beside the app's worker in one process made two-thread decoding collapse (111 tok/s called
from one thread, 34 from another; ARCHITECTURE.md, "Measured facts"). So the bench runs
llama-cpp-python's loops (:class:`~app.bench.loops.LlamaLoops`) in a child process of their
own, ``python -m app.bench.bare``, that calls llama.cpp from its main thread only and imports
no Qt: what a user's script around llama-cpp-python would get on this machine.

The parent drives it through :class:`BareLoops`, one request at a time: a JSON line on the
child's stdin, a JSON line back on its stdout. Each request names the thread counts to use
(``llama_set_n_threads`` between requests, on the same context).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, cast

from app.engine import ChatMessage, EngineOptions


class BareLoops:
    """The reference loops, run in a bare child process; used from one thread at a time.

    Args:
        model: the GGUF file.
        options: context and batch (thread counts are given per request).
        max_tokens: tokens per decode run.
        n_gpu_layers: layers llama-cpp-python offloads (-1: all; 0: the CPU alone).
    """

    def __init__(
        self, model: Path, options: EngineOptions, max_tokens: int, n_gpu_layers: int = 0
    ) -> None:
        spec = {
            "model": str(model),
            "n_ctx": options.n_ctx,
            "n_batch": options.n_batch,
            "max_tokens": max_tokens,
            "n_gpu_layers": n_gpu_layers,
            "flash_attn": options.flash_attn,
        }
        self._child = subprocess.Popen(
            [sys.executable, "-m", "app.bench.bare", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        hello = self._answer()
        self.pid: int = hello["pid"]
        self.qt_loaded: bool = hello["qt_loaded"]
        """Whether the child imported Qt (it must not: a bare process)."""

    def _answer(self) -> dict[str, Any]:
        assert self._child.stdout is not None
        line = self._child.stdout.readline()
        if not line:
            raise RuntimeError(f"the bench's child process ended (status {self._child.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the bench's child process failed: {answer['error']}")
        return answer

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._child.stdin is not None
        self._child.stdin.write(json.dumps(request) + "\n")
        self._child.stdin.flush()
        return self._answer()

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The prompt as llama-cpp-python reads it (its chat template, then the tokenizer)."""
        tokens: list[int] = self._ask({"do": "tokens", "messages": list(messages)})["tokens"]
        return tokens

    def count_tokens(self, text: str) -> int:
        """The model's token count of ``text`` (no BOS)."""
        count: int = self._ask({"do": "count", "text": text})["count"]
        return count

    def raw_run(self, messages: Sequence[ChatMessage], threads: int) -> tuple[float, list[str]]:
        """llama-cpp-python's own streaming loop on ``threads``: tokens/s and its pieces."""
        answer = self._ask({"do": "raw", "messages": list(messages), "threads": threads})
        return float(answer["rate"]), list(answer["pieces"])

    def native_run(self, tokens: Sequence[int], threads: int) -> float:
        """The leanest greedy loop over the C API on ``threads``: tokens per second."""
        answer = self._ask({"do": "native", "tokens": list(tokens), "threads": threads})
        return float(answer["rate"])

    def lookup_run(self, messages: Sequence[ChatMessage], threads: int) -> tuple[float, str]:
        """llama-cpp-python's prompt lookup (``LlamaPromptLookupDecoding``): tok/s, its text."""
        answer = self._ask({"do": "lookup", "messages": list(messages), "threads": threads})
        return float(answer["rate"]), str(answer["text"])

    def plain_tokens(self, text: str) -> list[int]:
        """A plain text to continue as the engine reads it (BOS, special tokens parsed)."""
        tokens: list[int] = self._ask({"do": "plain", "text": text})["tokens"]
        return tokens

    def batch_run(
        self, prompts: Sequence[Sequence[int]], tokens: int, n_ctx_seq: int, threads: int
    ) -> list[list[float]]:
        """The lean C-API loop over ``prompts`` side by side (one ``llama_decode`` a step).

        Each sequence's token times (``time.perf_counter()``, the same clock as this
        process's on Linux and macOS); ``threads`` decode, in a context of ``len(prompts)``
        sequences of ``n_ctx_seq`` tokens each.
        """
        answer = self._ask(
            {
                "do": "batch",
                "prompts": [list(p) for p in prompts],
                "tokens": tokens,
                "n_ctx_seq": n_ctx_seq,
                "threads": threads,
            }
        )
        times: list[list[float]] = answer["times"]
        return times

    def prefill_run(self, tokens: Sequence[int], threads: int) -> float:
        """``Llama.eval`` of ``tokens`` on an empty cache, ``threads`` batch threads: tok/s."""
        answer = self._ask({"do": "prefill", "tokens": list(tokens), "threads": threads})
        return float(answer["rate"])

    def close(self) -> None:
        """End the child (it frees its model when its stdin closes)."""
        if self._child.stdin is not None:
            self._child.stdin.close()
        try:
            self._child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        if self._child.stdout is not None:
            self._child.stdout.close()


def _serve(spec: dict[str, Any], requests: IO[str], answers: IO[str]) -> None:
    from app.bench.loops import LlamaLoops  # llama_cpp loads here, in the child only

    options = EngineOptions(
        n_ctx=int(spec["n_ctx"]),
        n_batch=int(spec["n_batch"]),
        flash_attn=bool(spec.get("flash_attn", False)),
    )
    loops = LlamaLoops(
        Path(spec["model"]), options, int(spec["max_tokens"]), int(spec.get("n_gpu_layers", 0))
    )

    def answer(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    answer({"pid": os.getpid(), "qt_loaded": any(m.startswith("PySide6") for m in sys.modules)})
    try:
        for line in requests:
            request = json.loads(line)
            do = request["do"]
            try:
                if do == "tokens":
                    messages = cast(list[ChatMessage], request["messages"])
                    answer({"tokens": loops.prompt_tokens(messages)})
                elif do == "count":
                    answer({"count": loops.count_tokens(request["text"])})
                elif do == "raw":
                    loops.set_threads(request["threads"], loops.threads_batch)
                    rate, pieces = loops.raw_run(request["messages"])
                    answer({"rate": rate, "pieces": pieces})
                elif do == "native":
                    loops.set_threads(request["threads"], loops.threads_batch)
                    answer({"rate": loops.native_run(request["tokens"])})
                elif do == "lookup":
                    rate, text = loops.lookup_run(request["messages"], request["threads"])
                    answer({"rate": rate, "text": text})
                elif do == "plain":
                    answer({"tokens": loops.plain_tokens(request["text"])})
                elif do == "batch":
                    loops.set_threads(request["threads"], loops.threads_batch)
                    times = loops.batch_run(
                        request["prompts"], int(request["tokens"]), int(request["n_ctx_seq"])
                    )
                    answer({"times": times})
                elif do == "prefill":
                    loops.set_threads(loops.threads, request["threads"])
                    answer({"rate": loops.prefill_run(request["tokens"])})
                else:
                    answer({"error": f"unknown request {do!r}"})
            except Exception as error:  # reported to the parent, which raises it there
                answer({"error": f"{type(error).__name__}: {error}"})
    finally:
        loops.close()


def main() -> None:
    """``python -m app.bench.bare SPEC``: serve requests on stdin until it closes."""
    # The answers go to a copy of stdout; whatever llama.cpp prints goes to stderr instead.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(json.loads(sys.argv[1]), sys.stdin, answers)


if __name__ == "__main__":
    main()
