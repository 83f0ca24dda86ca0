"""A repository's GGUF files as models to choose from: checked names, quantizations, splits.

Nothing from the Hub is trusted. A file's path in the repository becomes a local file name
only when every part of it is a plain name (no ``..``, no backslash, no drive, no control
character) and it ends in ``.gguf``; everything else is left out, never shown as a choice.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, replace

GGUF_SUFFIX = ".gguf"

_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<parts>\d{5})\.gguf$", re.IGNORECASE)
"""llama.cpp's split files: ``name-00001-of-00003.gguf``; llama.cpp opens the first part."""

_QUANT = re.compile(
    r"(?<![A-Za-z0-9])"
    r"(I?Q[0-9](?:_[A-Z0-9]+)*|TQ[0-9]_[0-9]|MXFP4(?:_MOE)?|BF16|FP16|FP32|F16|F32)"
    r"(?![A-Za-z0-9])",
    re.IGNORECASE,
)
"""A quantization label in a file name: Q4_K_M, Q8_0, IQ2_XXS, F16, …"""

_NAME_LIMIT = 255
"""Bytes in a file name on the common file systems."""

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def safe_repo_id(repo_id: str) -> bool:
    """Whether ``repo_id`` is an ``owner/name`` the Hub could have made (no ``..``, no URL)."""
    return bool(_REPO_ID.match(repo_id)) and ".." not in repo_id


def _plain_part(part: str) -> bool:
    if part in ("", ".", "..") or part.startswith("."):
        return False
    if any(ch in part for ch in '\\:*?"<>|'):
        return False
    return not any(unicodedata.category(ch).startswith("C") for ch in part)


def local_name(repo_path: str) -> str | None:
    """The local file name for ``repo_path`` in a repository, or None when it is not safe.

    Safe means: every ``/``-separated part is a plain name and the last one ends in .gguf.
    """
    parts = repo_path.split("/")
    if not all(_plain_part(part) for part in parts):
        return None
    name = parts[-1]
    if not name.lower().endswith(GGUF_SUFFIX) or len(name.encode()) > _NAME_LIMIT:
        return None
    return name


def quantization_of(name: str) -> str:
    """The quantization label in a file name (the last one found), upper-case, or ""."""
    stem = name[: -len(GGUF_SUFFIX)] if name.lower().endswith(GGUF_SUFFIX) else name
    found = _QUANT.findall(stem)
    return found[-1].upper() if found else ""


@dataclass(frozen=True)
class HubFile:
    """One file in a repository, as the Hub lists it.

    Attributes:
        path: the path in the repository (as listed; checked before use).
        size: its size in bytes, as listed.
        sha256: the LFS object id (the content's sha256), or None for a file not in LFS.
    """

    path: str
    size: int
    sha256: str | None

    @property
    def name(self) -> str:
        """The local file name (only made for files :func:`model_choices` kept)."""
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ModelChoice:
    """One model to download: a single GGUF file, or every part of a split one, in order.

    Attributes:
        label: what the choice is called: the file name, or the first part's for a split.
        quantization: Q4_K_M, Q8_0, … ("" when the name does not say).
        files: the files, parts in order (llama.cpp opens the first).
    """

    label: str
    quantization: str
    files: tuple[HubFile, ...]
    projector: HubFile | None = None
    """The repository's projector that goes with it (``mmproj-*.gguf``: the model sees),
    downloaded beside it, where Floodgate pairs them."""

    @property
    def size(self) -> int:
        """Bytes of all its files, the projector's included."""
        return sum(f.size for f in self.downloads)

    @property
    def downloads(self) -> tuple[HubFile, ...]:
        """Every file to download: the model's (in order), then its projector."""
        return self.files if self.projector is None else (*self.files, self.projector)

    @property
    def first(self) -> HubFile:
        """The file llama.cpp opens (and the one whose header describes the model)."""
        return self.files[0]

    def local_name(self, file: HubFile) -> str:
        """The name ``file`` is kept under in the models folder.

        The model's files keep their names. The projector is named after the model
        (``mmproj-<model>.gguf``): repositories often call theirs ``mmproj-F16.gguf`` or
        ``mmproj-model-f16.gguf``, which in the one downloads folder would pair with no model
        (:func:`~app.engine.model_card.find_projector` pairs by shared name) and would
        overwrite another repository's projector of the same name.
        """
        if file is not self.projector:
            return file.name
        stem = self.first.name.removesuffix(".gguf")
        return f"mmproj-{stem}.gguf"

    @property
    def is_split(self) -> bool:
        """Whether it comes in several parts."""
        return len(self.files) > 1


def _is_projector(name: str) -> bool:
    # A vision projector (mmproj-*.gguf) goes with a model; it is no model to chat with.
    return "mmproj" in name.lower()


def model_choices(files: list[HubFile]) -> list[ModelChoice]:
    """The models in a repository's file list, smallest first.

    Only files with a safe name ending in .gguf and an LFS sha256 are kept (without a sha256
    nothing could be verified). Split files become one choice when every part is there; a
    split with parts missing is left out, and so is a vision projector.
    """
    singles: list[ModelChoice] = []
    splits: dict[tuple[str, int], dict[int, HubFile]] = defaultdict(dict)
    seen_names: set[str] = set()
    projectors: list[HubFile] = []
    for file in files:
        name = local_name(file.path)
        if name is None or file.sha256 is None or file.size <= 0:
            continue
        if _is_projector(name):
            projectors.append(file)
            continue
        if name.lower() in seen_names:  # two folders, one name: one local file would be both
            continue
        seen_names.add(name.lower())
        split = _SPLIT.match(file.path)
        if split is None:
            singles.append(ModelChoice(name, quantization_of(name), (file,)))
            continue
        parts = int(split["parts"])
        part = int(split["part"])
        if 1 <= part <= parts:
            splits[(split["stem"], parts)][part] = file
    for (_stem, parts), found in splits.items():
        if sorted(found) != list(range(1, parts + 1)):
            continue
        ordered = tuple(found[i] for i in range(1, parts + 1))
        first = ordered[0].name
        singles.append(ModelChoice(first, quantization_of(_SPLIT.sub(r"\g<stem>", first)), ordered))
    if projectors:
        singles = [replace(c, projector=projector_for(c.quantization, projectors)) for c in singles]
    return sorted(singles, key=lambda choice: (choice.size, choice.label))


def projector_for(quantization: str, projectors: list[HubFile]) -> HubFile:
    """The projector for a model of ``quantization``.

    The same quantization if there is one (``mmproj-…-Q8_0`` for a Q8_0 model), else F16
    (what most repositories offer), else the smallest.
    """
    by_quant = {quantization_of(p.name): p for p in sorted(projectors, key=lambda p: p.path)}
    for wanted in (quantization, "F16"):
        if wanted and wanted in by_quant:
            return by_quant[wanted]
    return min(projectors, key=lambda p: (p.size, p.path))


def find_choice(choices: list[ModelChoice], wanted: str) -> ModelChoice | None:
    """The choice named by ``wanted``: a file name (any part of a split), or a quantization."""
    for choice in choices:
        if any(wanted in (f.path, f.name) for f in choice.files):
            return choice
    label = wanted.upper()
    matching = [c for c in choices if c.quantization == label]
    return matching[0] if len(matching) == 1 else None


def size_text(n: float) -> str:
    """1.4 GB, 350 MB, 12 KB: a size as people read it (powers of 1024)."""
    for unit, size in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
