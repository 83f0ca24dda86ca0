"""The model settings the user can change: sampling, context, threads, queue; with their ranges.

Plain data, no Qt: the settings dialog shows :data:`FIELDS`, checks what is typed with
:func:`parse`, and the composition root turns a :class:`Settings` into the engine's and the
flow's own options.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from app import defaults
from app.sentence import QT_TRANSLATE_NOOP, Sentence

Kind = Literal["text", "float", "int", "optional_int", "choice", "flag", "model"]

Section = Literal["replies", "compute", "memory"]


@dataclass(frozen=True)
class Settings:
    """What Floodgate generates with (the defaults are :mod:`app.defaults`)."""

    system_prompt: str = ""
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    top_k: int = defaults.TOP_K
    min_p: float = defaults.MIN_P
    repeat_penalty: float = defaults.REPEAT_PENALTY
    max_tokens: int = defaults.MAX_TOKENS
    seed: int | None = defaults.SEED
    n_ctx: int = defaults.N_CTX
    compute: str = defaults.COMPUTE
    gpu_layers: int | None = defaults.GPU_LAYERS
    gpu_memory_mb: int = defaults.GPU_MEMORY_MB
    parallel: int = defaults.PARALLEL
    prompt_lookup: bool = defaults.PROMPT_LOOKUP
    draft_model: str = ""
    """The file of a model that writes ahead for the open one ("": none)."""
    decode_threads: int = defaults.DECODE_THREADS
    prompt_threads: int = defaults.PROMPT_THREADS
    n_batch: int = defaults.N_BATCH
    cache_ram_mb: int = defaults.CACHE_RAM_MB
    cache_disk_mb: int = defaults.CACHE_DISK_MB
    queue_bound: int = defaults.QUEUE_BOUND


@dataclass(frozen=True)
class Field:
    """One setting as the dialog shows it."""

    name: str
    label: str
    kind: Kind
    minimum: float = 0
    maximum: float = 0
    reload: bool = False
    """Takes effect only when the model is opened again (the engine reads it at load)."""
    section: Section = "replies"
    """Where the dialog shows it: replies (sampling), compute (devices, threads), memory."""
    empty: str = ""
    """What leaving an ``optional_int`` empty means, for the sentence when it is wrong."""
    zero: str = ""
    """What 0 means for an ``int``, shown instead of 0 ("Auto"); "" shows the 0."""
    help: str = ""
    """What the setting does, in plain words (the dialog's tooltip); "" for none."""


SECTIONS: tuple[tuple[Section, str], ...] = (
    ("replies", QT_TRANSLATE_NOOP("Floodgate", "Replies")),
    ("compute", QT_TRANSLATE_NOOP("Floodgate", "Compute")),
    ("memory", QT_TRANSLATE_NOOP("Floodgate", "Memory")),
)
"""The dialog's sections, in order, with their titles."""

_RANDOM_SEED = QT_TRANSLATE_NOOP("Floodgate", "a random seed")
_AS_MANY_AS_FIT = QT_TRANSLATE_NOOP("Floodgate", "as many as fit")
AUTO = QT_TRANSLATE_NOOP("Floodgate", "Auto")


FIELDS: tuple[Field, ...] = (
    Field("system_prompt", QT_TRANSLATE_NOOP("Floodgate", "System prompt for new chats"), "text"),
    Field("temperature", QT_TRANSLATE_NOOP("Floodgate", "Temperature"), "float", 0, 2),
    Field("top_p", QT_TRANSLATE_NOOP("Floodgate", "Top p"), "float", 0, 1),
    Field("top_k", QT_TRANSLATE_NOOP("Floodgate", "Top k (0: off)"), "int", 0, 1000),
    Field("min_p", QT_TRANSLATE_NOOP("Floodgate", "Min p"), "float", 0, 1),
    Field("repeat_penalty", QT_TRANSLATE_NOOP("Floodgate", "Repeat penalty"), "float", 0.5, 2),
    Field("max_tokens", QT_TRANSLATE_NOOP("Floodgate", "Max tokens per reply"), "int", 1, 131072),
    Field(
        "seed",
        QT_TRANSLATE_NOOP("Floodgate", "Seed (empty: random)"),
        "optional_int",
        0,
        2**31 - 1,
        empty=_RANDOM_SEED,
    ),
    Field(
        "compute",
        QT_TRANSLATE_NOOP("Floodgate", "Run models on"),
        "choice",
        reload=True,
        section="compute",
    ),
    Field(
        "gpu_layers",
        QT_TRANSLATE_NOOP("Floodgate", "GPU layers (empty: as many as fit)"),
        "optional_int",
        0,
        9999,
        True,
        section="compute",
        empty=_AS_MANY_AS_FIT,
    ),
    Field(
        "gpu_memory_mb",
        QT_TRANSLATE_NOOP("Floodgate", "GPU memory a model may use (MB, 0: what is free)"),
        "int",
        0,
        10_000_000,
        True,
        section="compute",
    ),
    Field(
        "parallel",
        QT_TRANSLATE_NOOP("Floodgate", "Parallel replies"),
        "int",
        0,
        defaults.PARALLEL_MAX,
        True,
        section="compute",
        zero=AUTO,
        help=QT_TRANSLATE_NOOP(
            "Floodgate",
            "How many replies the model can write at once: the window's and those other "
            "programs ask for through the local API server. Each one keeps its own context "
            "in memory, so more uses more memory; writing several at once is a little slower "
            "for each but faster for all together. Auto chooses from the memory there is.",
        ),
    ),
    Field(
        "prompt_lookup",
        QT_TRANSLATE_NOOP("Floodgate", "Guess ahead from the conversation"),
        "flag",
        reload=True,
        section="compute",
        help=QT_TRANSLATE_NOOP(
            "Floodgate",
            "Speculative decoding: where a reply copies from the conversation (code to "
            "edit, a text to quote), the words that followed there are checked several at a "
            "time, when that is faster on this machine. The model checks every guess, but on "
            "a CPU a guessed word is computed in a batch whose last digits differ, so a reply "
            "can now and then differ from the one without guessing. The diagnostics panel "
            "shows how many guesses were kept.",
        ),
    ),
    Field(
        "draft_model",
        QT_TRANSLATE_NOOP("Floodgate", "Draft model"),
        "model",
        reload=True,
        section="compute",
        help=QT_TRANSLATE_NOOP(
            "Floodgate",
            "A smaller model of the same family writes a few words ahead, and the open model "
            "checks them together: faster where the small one guesses well, slower where it "
            "does not. The reply is the open model's own. Offered: the downloaded models with "
            "the open model's vocabulary. It takes memory of its own.",
        ),
    ),
    Field(
        "decode_threads",
        QT_TRANSLATE_NOOP("Floodgate", "Decode threads (0: measured on this machine)"),
        "int",
        0,
        max(1, os.cpu_count() or 1),
        True,
        section="compute",
    ),
    Field(
        "prompt_threads",
        QT_TRANSLATE_NOOP("Floodgate", "Prompt threads (0: every physical core)"),
        "int",
        0,
        max(1, os.cpu_count() or 1),
        True,
        section="compute",
    ),
    Field(
        "n_batch",
        QT_TRANSLATE_NOOP("Floodgate", "Batch size"),
        "int",
        1,
        8192,
        True,
        section="compute",
    ),
    Field(
        "n_ctx",
        QT_TRANSLATE_NOOP("Floodgate", "Context size (tokens)"),
        "int",
        256,
        131072,
        True,
        section="memory",
    ),
    Field(
        "cache_ram_mb",
        QT_TRANSLATE_NOOP("Floodgate", "Prompt cache in memory (MB, 0: off)"),
        "int",
        0,
        1_000_000,
        True,
        section="memory",
    ),
    Field(
        "cache_disk_mb",
        QT_TRANSLATE_NOOP("Floodgate", "Prompt cache on disk (MB, 0: off)"),
        "int",
        0,
        10_000_000,
        True,
        section="memory",
    ),
    Field(
        "queue_bound",
        QT_TRANSLATE_NOOP("Floodgate", "Queue bound (pieces)"),
        "int",
        1,
        100000,
        section="memory",
    ),
)


_YES = ("true", "1", "yes", "on")
_NO = ("false", "0", "no", "off")


def _number(value: float) -> str:
    return f"{value:g}"


def parse(field: Field, text: str) -> tuple[Any, Sentence | None]:
    """The value typed for ``field``, or None and a sentence saying what is expected."""
    if field.kind == "text":
        return text, None
    text = text.strip()
    if field.kind == "flag":
        if text.lower() in _YES or text.lower() in _NO:
            return text.lower() in _YES, None
        return None, Sentence(QT_TRANSLATE_NOOP("Floodgate", "Choose on or off."))
    if field.kind == "model":
        return text, None  # a file, or "" for none; one that cannot draft is said at load
    if field.kind == "choice":
        # Which choices exist is the machine's (its GPUs): a name no longer there is
        # reported when the model loads, not refused here.
        if text:
            return text, None
        return None, Sentence(QT_TRANSLATE_NOOP("Floodgate", "Choose one."))
    if field.kind == "optional_int" and not text:
        return None, None
    limits = {"minimum": _number(field.minimum), "maximum": _number(field.maximum)}
    try:
        value: float = int(text) if field.kind != "float" else float(text)
    except ValueError:
        value = float("nan")
    if value != value or not field.minimum <= value <= field.maximum:  # NaN, or out of range
        if field.kind == "float":
            template = QT_TRANSLATE_NOOP("Floodgate", "Enter a number from {minimum} to {maximum}.")
        elif field.kind == "int":
            template = QT_TRANSLATE_NOOP(
                "Floodgate", "Enter a whole number from {minimum} to {maximum}."
            )
        else:
            template = QT_TRANSLATE_NOOP(
                "Floodgate",
                "Enter a whole number from {minimum} to {maximum}, or nothing for {empty}.",
            )
            return None, Sentence(template, {**limits, "empty": Sentence(field.empty)})
        return None, Sentence(template, limits)
    return value, None


def shown(settings: Settings, field: Field) -> str:
    """A setting's value as the dialog shows it."""
    value = getattr(settings, field.name)
    if value is None:
        return ""
    return _number(value) if isinstance(value, float) else str(value)


def from_mapping(raw: object) -> Settings:
    """Settings from a saved mapping; anything missing or invalid keeps its default."""
    settings = Settings()
    if not isinstance(raw, dict):
        return settings
    known = {f.name: f for f in FIELDS}
    changes: dict[str, Any] = {}
    for name, value in raw.items():
        field = known.get(name)
        if field is None:
            continue
        parsed, problem = parse(field, "" if value is None else str(value))
        if problem is None:
            changes[name] = parsed
    return replace(settings, **changes)


def to_mapping(settings: Settings) -> dict[str, Any]:
    """Settings as a JSON-ready mapping."""
    return {f.name: getattr(settings, f.name) for f in fields(settings)}


SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_tokens", "seed")
"""The settings a conversation can have its own values for."""


def overrides(chosen: Settings, base: Settings) -> dict[str, Any]:
    """The sampling settings in which ``chosen`` differs from ``base``."""
    return {
        name: getattr(chosen, name)
        for name in SAMPLING
        if getattr(chosen, name) != getattr(base, name)
    }


def with_overrides(base: Settings, raw: dict[str, object]) -> Settings:
    """``base`` with a conversation's own values; invalid or unknown ones are ignored."""
    known = {f.name: f for f in FIELDS if f.name in SAMPLING}
    changes: dict[str, Any] = {}
    for name, value in raw.items():
        field = known.get(name)
        if field is not None:
            parsed, problem = parse(field, "" if value is None else str(value))
            if problem is None:
                changes[name] = parsed
    return replace(base, **changes)
