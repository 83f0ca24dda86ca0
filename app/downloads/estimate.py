"""Will it fit? The memory a model needs, from its GGUF header read before downloading it.

The need is the weights (the file's size: llama.cpp maps the file) plus the KV cache at the
chosen context: ``n_ctx x layers x kv_heads x (key_length + value_length) x 2`` bytes at f16.
The header is read from the Hub with HTTP range requests, 2 MB at a time (as Jan does), so
a 40 GB model is judged from its first few megabytes.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from app.downloads.errors import DownloadError
from app.downloads.files import ModelChoice
from app.engine.errors import ModelLoadError
from app.engine.fit import ModelShape, model_shape
from app.engine.model_card import GGUFHeader, HeaderCutShortError, parse_gguf_header
from app.sentence import QT_TRANSLATE_NOOP

HEADER_CHUNK = 2 * 1024 * 1024
"""Bytes asked for per range request while the header is incomplete."""

HEADER_LIMIT = 64 * 1024 * 1024
"""A header longer than this is not read (a vocabulary of 250,000 tokens is about 10 MB)."""

FITS_SHARE = 0.7
"""A model that needs at most this share of the RAM fits: the rest is for the system and apps."""

TIGHT_SHARE = 0.9
"""Up to this share it is tight (it may run, other programs may suffer); above, too large."""

_FLOAT_TYPES = ("F32", "F16", "BF16", "FP16", "FP32")


class Fit(enum.Enum):
    """How a model's need compares with this machine's memory."""

    GPU = "fits the GPU"
    """Every layer fits the GPU's free memory (the fastest way to run it)."""
    FITS = "fits"
    TIGHT = "tight"
    TOO_LARGE = "too large"


def _fetch_range(
    client: httpx.Client, url: str, headers: dict[str, str], start: int, end: int
) -> bytes:
    """Bytes ``start`` to ``end`` (exclusive) of the file at ``url``; fewer at its end."""
    wanted = end - start
    ranged = {**headers, "Range": f"bytes={start}-{end - 1}"}
    with client.stream("GET", url, headers=ranged) as response:
        if response.status_code == 416:
            return b""
        response.raise_for_status()
        skip = start if response.status_code == 200 else 0  # a server that ignores ranges
        data = bytearray()
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) >= skip + wanted:
                break
        return bytes(data[skip : skip + wanted])


def remote_header(
    client: httpx.Client, url: str, name: str, headers: dict[str, str] | None = None
) -> GGUFHeader:
    """The GGUF header of the file at ``url``, read with range requests until it is complete.

    Raises:
        DownloadError: the file cannot be fetched, is not GGUF, or its header is too long.
    """
    data = b""
    want = HEADER_CHUNK
    while True:
        try:
            data += _fetch_range(client, url, headers or {}, len(data), want)
        except httpx.HTTPStatusError as exc:
            raise DownloadError(
                QT_TRANSLATE_NOOP(
                    "Floodgate", "The header of {name} cannot be fetched: HTTP {status}."
                ),
                name=name,
                status=exc.response.status_code,
            ) from exc
        except httpx.HTTPError as exc:
            raise DownloadError(
                QT_TRANSLATE_NOOP("Floodgate", "The header of {name} cannot be fetched: {reason}."),
                name=name,
                reason=type(exc).__name__,
            ) from exc
        try:
            return parse_gguf_header(data, name)
        except HeaderCutShortError:
            if len(data) < want or want >= HEADER_LIMIT:  # the file or the patience ended
                raise DownloadError(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The header of {name} is cut short or longer than Floodgate reads.",
                    ),
                    name=name,
                ) from None
            want = min(want * 2, HEADER_LIMIT)
        except ModelLoadError as exc:  # not GGUF, or damaged: its sentence says how
            raise DownloadError.saying(exc.sentence) from exc


def machine_memory() -> int:
    """This machine's RAM in bytes (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


@dataclass(frozen=True)
class MemoryEstimate:
    """A model's need against this machine's memory.

    Attributes:
        weights: bytes of the weights (the files' size).
        kv_cache: bytes of the KV cache at ``n_ctx`` (None when the header did not say).
        n_ctx: the context length it was computed for.
        memory: this machine's RAM in bytes.
        fit: fits the GPU, fits, tight or too large.
    """

    weights: int
    kv_cache: int | None
    n_ctx: int
    memory: int
    fit: Fit

    @property
    def total(self) -> int:
        """Weights plus KV cache."""
        return self.weights + (self.kv_cache or 0)


def judge(need: int, memory: int) -> Fit:
    """Fits, tight or too large, for ``need`` bytes in ``memory`` bytes of RAM."""
    if memory <= 0:  # unknown: say nothing worse than tight
        return Fit.TIGHT
    if need <= memory * FITS_SHARE:
        return Fit.FITS
    if need <= memory * TIGHT_SHARE:
        return Fit.TIGHT
    return Fit.TOO_LARGE


def estimate(
    choice: ModelChoice, shape: ModelShape | None, n_ctx: int, memory: int, gpu: int = 0
) -> MemoryEstimate:
    """The estimate for ``choice`` at ``n_ctx`` (capped at the trained context).

    Args:
        choice: the model.
        shape: its KV cache's shape (None: unknown, weights only).
        n_ctx: the context it would run with.
        memory: this machine's RAM in bytes.
        gpu: bytes a GPU could give it (its free memory less the margin; 0: no GPU). What
            does not fit there runs from RAM, as the layers left on the CPU do.
    """
    if shape is not None and shape.context_length:
        n_ctx = min(n_ctx, shape.context_length)
    kv = shape.kv_cache_bytes(n_ctx) if shape is not None else None
    need = choice.size + (kv or 0)
    fit = Fit.GPU if gpu > 0 and need <= gpu else judge(need - gpu, memory)
    return MemoryEstimate(choice.size, kv, n_ctx, memory, fit)


def recommend(choices: list[ModelChoice], estimates: list[MemoryEstimate]) -> int | None:
    """The index of the choice to recommend, or None.

    The largest that fits (more bits, better answers), leaving out 16- and 32-bit floats
    while a quantized one fits (twice the memory for little gain); failing that, the
    smallest that is tight.
    """
    # What fits the GPU first (many times faster), then what fits in memory.
    fitting = [i for i, e in enumerate(estimates) if e.fit is Fit.GPU] or [
        i for i, e in enumerate(estimates) if e.fit is Fit.FITS
    ]
    quantized = [i for i in fitting if choices[i].quantization not in _FLOAT_TYPES]
    pool = quantized or fitting
    if pool:
        return max(pool, key=lambda i: estimates[i].total)
    tight = [i for i, e in enumerate(estimates) if e.fit is Fit.TIGHT]
    return min(tight, key=lambda i: estimates[i].total) if tight else None


@dataclass(frozen=True)
class Assessment:
    """A repository's choices judged for this machine.

    Attributes:
        estimates: one per choice, in the same order.
        recommended: the index of the recommended choice, or None.
        shape: the model's KV shape (None when its header could not be read).
        problem: why the header could not be read (the estimates then count weights only).
    """

    estimates: list[MemoryEstimate]
    recommended: int | None
    shape: ModelShape | None
    problem: DownloadError | None = None


def assess(
    client: httpx.Client,
    choices: list[ModelChoice],
    url_of: Callable[[str], str],
    headers: dict[str, str],
    n_ctx: int,
    memory: int,
    gpu: int = 0,
) -> Assessment:
    """Judge every choice, from the header of the smallest one (waits on the network).

    The quantizations of one repository are one model: the layers and heads that size the
    KV cache are the same in each, so one header (of the smallest file) serves them all.

    Args:
        client: the HTTP client.
        choices: the repository's choices.
        url_of: a file's download address from its path in the repository.
        headers: sent with the range requests (the token, if any).
        n_ctx: the context length the model would run with.
        memory: this machine's RAM in bytes.
        gpu: bytes a GPU could give a model (0: no GPU).
    """
    shape: ModelShape | None = None
    problem: DownloadError | None = None
    if choices:
        first = min(choices, key=lambda c: c.size).first
        try:
            shape = model_shape(remote_header(client, url_of(first.path), first.name, headers))
        except DownloadError as exc:
            problem = exc
    estimates = [estimate(choice, shape, n_ctx, memory, gpu) for choice in choices]
    return Assessment(estimates, recommend(choices, estimates), shape, problem)
