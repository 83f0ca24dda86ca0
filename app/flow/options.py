"""The one place that converts between the settings the user keeps and the engine's options.

The store's :class:`~app.store.settings.Settings` and the engine's
:class:`~app.engine.backend.EngineOptions` / :class:`~app.engine.backend.GenerationSettings`
share field names (and their defaults, :mod:`app.defaults`); conversions go by those names.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from app.engine import EngineOptions, GenerationSettings
from app.store.settings import SAMPLING, Settings, with_overrides


def engine_options(settings: Settings, cache_dir: Path | None = None) -> EngineOptions:
    """How the engine opens models, from the settings.

    Args:
        settings: the user's settings (the options they share by name with the engine's).
        cache_dir: where processed prompts are kept on disk (None: in RAM only).
    """
    kept = {f.name for f in fields(Settings)} - {"draft_model"}  # a file's name, not a Path
    shared = {f.name: getattr(settings, f.name) for f in fields(EngineOptions) if f.name in kept}
    return EngineOptions(
        **shared,
        # llama.cpp's names in the engine, the user's words in the settings.
        n_threads=settings.decode_threads,
        n_threads_batch=settings.prompt_threads,
        cache_dir=cache_dir if settings.cache_disk_mb > 0 else None,
        draft_model=Path(settings.draft_model) if settings.draft_model else None,
    )


def generation_settings(settings: Settings) -> GenerationSettings:
    """How replies are sampled, from the settings.

    Settings hold what the window offers; what only the API sets per request (its penalties,
    stop strings, a grammar) keeps the engine's default here.
    """
    return GenerationSettings(**{name: getattr(settings, name) for name in _kept_sampling()})


def as_settings(sampling: GenerationSettings) -> Settings:
    """The sampling the app uses, as settings (for comparing with a conversation's own)."""
    return Settings(**{name: getattr(sampling, name) for name in _kept_sampling()})


def _kept_sampling() -> list[str]:
    """The sampling fields the user's settings keep."""
    kept = {f.name for f in fields(Settings)}
    return [f.name for f in fields(GenerationSettings) if f.name in kept]


def with_conversation(sampling: GenerationSettings, own: dict[str, object]) -> GenerationSettings:
    """The app's sampling with a conversation's own values over it."""
    chosen = with_overrides(as_settings(sampling), own)
    return replace(sampling, **{name: getattr(chosen, name) for name in SAMPLING})


def add_compute_arguments(parser: argparse.ArgumentParser) -> None:
    """The window's and ``floodgate serve``'s options of where and how models run.

    ``--compute``, ``--gpu-layers``, ``--parallel`` and ``--prompt-lookup``.
    """
    parser.add_argument(
        "--compute",
        default=None,
        metavar="WHERE",
        help="where models run: auto (a GPU if there is one), cpu, or a GPU's name as "
        "Settings lists it (Vulkan0, CUDA1); default: as in Settings",
    )
    parser.add_argument(
        "--gpu-layers",
        type=int,
        default=None,
        metavar="N",
        help="layers offloaded to the GPU (default: as many as its free memory holds)",
    )
    parser.add_argument(
        "--parallel",
        type=_count,
        default=None,
        metavar="N",
        help="replies the model writes at once, each with a context of its own in memory "
        "(more uses more memory); 0: chosen from the memory there is; 1: one at a time; "
        "default: Settings' Parallel replies (Auto unless changed)",
    )
    parser.add_argument(
        "--draft-model",
        type=Path,
        default=None,
        metavar="GGUF",
        help="a smaller model of the same vocabulary that writes ahead for the model "
        "(speculative decoding); default: Settings' Draft model (none unless chosen)",
    )
    parser.add_argument(
        "--prompt-lookup",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="guess ahead from the conversation (speculative decoding by prompt lookup): "
        "faster where replies copy from their input; a reply can differ in a word from one "
        "without it on a CPU; default: Settings' Guess ahead (off unless changed)",
    )


def compute_from_command_line(args: argparse.Namespace) -> dict[str, Any]:
    """What ``--compute``, ``--gpu-layers``, ``--parallel`` and ``--prompt-lookup`` say.

    By the settings' names, which are the engine options' too
    (:class:`~app.engine.EngineOptions`).
    """
    given = {
        "compute": args.compute,
        "gpu_layers": args.gpu_layers,
        "parallel": args.parallel,
        "prompt_lookup": args.prompt_lookup,
    }
    return {name: value for name, value in given.items() if value is not None}


def _count(text: str) -> int:
    """A whole number of 0 or more (``--parallel``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (auto) or more, not {value}")
    return value


@dataclass
class CommandLineSettings:
    """The settings the command line gave for this run, over the saved ones.

    The window shows what is in force (these over the saved settings). A field the user then
    changes there (Settings, the picker's Draft model) is theirs from then on: its override
    lets go for the rest of the run, and the new value is saved. A field left as the command
    line set it keeps its saved value: a flag given for one run is never saved as the user's.

    Attributes:
        given: the settings the command line set, by name.
    """

    given: dict[str, Any] = field(default_factory=dict)

    def apply(self, saved: Settings) -> Settings:
        """``saved`` with the command line's settings over it: what is in force."""
        return replace(saved, **self.given)

    def to_save(self, saved: Settings, chosen: Settings) -> Settings:
        """What to save when the user chose ``chosen`` (edited from :meth:`apply`'s values)."""
        left: dict[str, Any] = {}
        for name, value in list(self.given.items()):
            if getattr(chosen, name) == value:
                left[name] = getattr(saved, name)
            else:
                del self.given[name]  # changed in the window: the user's from now on
        return replace(chosen, **left)
