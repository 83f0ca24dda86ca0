"""What a GGUF file holds, read from its header without loading the weights.

The header is read here, not by the ``gguf`` package or llama.cpp: their readers decode
strings strictly, so one invalid UTF-8 byte in any string (``general.name``, say) makes them
fail, and llama-cpp-python then drops *all* the metadata, the chat template included. This
reader decodes every string with replacement characters, checks every length against the
file's size, and says in a sentence what is wrong when the header is damaged.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal, TypeAlias

from app.engine.errors import ModelLoadError
from app.engine.model_file import (
    FILE_TIMEOUT_S,
    check_model_file,
    readable_name,
    within_timeout,
)
from app.sentence import QT_TRANSLATE_NOOP

log = logging.getLogger(__name__)

CHAT_TEMPLATE_KEY = "tokenizer.chat_template"

TOKENS_KEY = "tokenizer.ggml.tokens"
"""The vocabulary's tokens: a long array, skipped but fingerprinted (:attr:`GGUFHeader.tokens`)."""

_KEPT_ARRAY_ITEMS = 64
"""Arrays longer than this (the vocabulary, the merges) are skipped, not kept."""

_MAX_DIMENSIONS = 16
_MAX_NESTING = 8

# GGUF value types: (struct format, size) of the fixed-size ones.
_STRING, _ARRAY = 8, 9
_FIXED: dict[int, tuple[str, int]] = {
    0: ("B", 1),
    1: ("b", 1),
    2: ("H", 2),
    3: ("h", 2),
    4: ("I", 4),
    5: ("i", 4),
    6: ("f", 4),
    7: ("?", 1),
    10: ("Q", 8),
    11: ("q", 8),
    12: ("d", 8),
}


@dataclass(frozen=True)
class SkippedArray:
    """An array in the header too long to keep (its length and item type)."""

    length: int
    item_type: int


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF file's header: its metadata, and what its tensors add up to.

    Attributes:
        version: the GGUF format version.
        metadata: every key and its value; strings with invalid UTF-8 hold replacement
            characters; long arrays are :class:`SkippedArray`.
        tensor_count: how many tensors the file declares.
        parameters: the number of weights (sum of the tensors' element counts), when read.
        tensors: each tensor's name and where its data starts in the file, when read.
        tokens: a digest of the vocabulary's tokens as the file holds them ("": none).
    """

    version: int
    metadata: dict[str, object] = field(default_factory=dict)
    tensor_count: int = 0
    parameters: int | None = None
    tensors: tuple[tuple[str, int], ...] = ()
    tokens: str = ""

    @property
    def vocabulary(self) -> str:
        """What two models must share to draft for each other, as one digest.

        The tokenizer's kind, its tokens (each id's text) and its beginning and end tokens
        ("": no vocabulary in the header).
        """
        if not self.tokens:
            return ""
        parts = [self.tokens] + [
            str(self.metadata.get(key))
            for key in (
                "tokenizer.ggml.model",
                "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.eos_token_id",
            )
        ]
        return hashlib.blake2b("|".join(parts).encode(), digest_size=16).hexdigest()

    def tensor_bytes(self, file_size: int) -> dict[str, int]:
        """Each tensor's bytes in a file of ``file_size`` bytes, by name.

        From where each one's data starts to where the next one's does (the last: to the
        end of the file), so no table of quantization block sizes is needed; the padding
        between tensors (at most the alignment) is counted with the one before it.
        """
        ordered = sorted(self.tensors, key=lambda item: item[1])
        ends = [start for _, start in ordered[1:]] + [file_size]
        return {name: max(0, end - start) for (name, start), end in zip(ordered, ends, strict=True)}


class _DamagedHeaderError(Exception):
    """The header is not what GGUF says it should be; the message says how (English)."""


class HeaderCutShortError(_DamagedHeaderError):
    """The bytes end before the header does: in a file, damage; in a download, read more."""

    def __init__(self) -> None:
        super().__init__("it ends in the middle of its header")


class _Cursor:
    """Reads little- or big-endian GGUF values from a buffer, never past its end."""

    def __init__(self, data: bytes | mmap.mmap, version_1: bool, order: str) -> None:
        self.data = data
        self.size = len(data)
        self.pos = 0
        self.order = order
        self.count_format = order + ("I" if version_1 else "Q")
        self.count_size = 4 if version_1 else 8

    def take(self, n: int) -> int:
        """Advance by ``n`` bytes; returns where they start."""
        if n < 0 or self.pos + n > self.size:
            raise HeaderCutShortError
        start = self.pos
        self.pos += n
        return start

    def fixed(self, fmt: str, size: int) -> object:
        start = self.take(size)
        value: object = struct.unpack_from(self.order + fmt, self.data, start)[0]
        return value

    def count(self) -> int:
        start = self.take(self.count_size)
        value: int = struct.unpack_from(self.count_format, self.data, start)[0]
        return value

    def u64(self) -> int:
        start = self.take(8)
        value: int = struct.unpack_from(self.order + "Q", self.data, start)[0]
        return value

    def u32(self) -> int:
        start = self.take(4)
        value: int = struct.unpack_from(self.order + "I", self.data, start)[0]
        return value

    def string(self) -> str:
        length = self.count()
        start = self.take(length)
        return bytes(self.data[start : start + length]).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.take(self.count())

    def value(self, value_type: int, depth: int = 0) -> object:
        if value_type == _STRING:
            return self.string()
        if value_type == _ARRAY:
            if depth >= _MAX_NESTING:
                raise _DamagedHeaderError("its arrays are nested too deep")
            item_type = self.u32()
            length = self.count()
            if length > _KEPT_ARRAY_ITEMS:
                self.skip_items(item_type, length, depth + 1)
                return SkippedArray(length, item_type)
            return [self.value(item_type, depth + 1) for _ in range(length)]
        if value_type in _FIXED:
            return self.fixed(*_FIXED[value_type])
        raise _DamagedHeaderError(f"it holds a value of unknown type {value_type}")

    def skip_items(self, item_type: int, length: int, depth: int) -> None:
        if item_type in _FIXED:
            self.take(_FIXED[item_type][1] * length)
        elif item_type == _STRING:
            # Each string is at least its length field: a bogus count fails fast.
            if length * self.count_size > self.size - self.pos:
                raise HeaderCutShortError
            for _ in range(length):
                self.skip_string()
        else:
            for _ in range(length):
                self.value(item_type, depth)


def _parse(data: bytes | mmap.mmap, with_tensors: bool) -> GGUFHeader:
    if len(data) < 8 or bytes(data[:4]) != b"GGUF":
        raise _DamagedHeaderError("it does not start as a GGUF file")
    version = struct.unpack_from("<I", data, 4)[0]
    order = "<"
    if version & 0xFFFF == 0 and version != 0:
        # Big-endian files exist (for s390x); their version reads byte-swapped here.
        order, version = ">", struct.unpack_from(">I", data, 4)[0]
    if version not in (1, 2, 3):
        raise _DamagedHeaderError(f"its GGUF version {version} is unknown")
    cursor = _Cursor(data, version == 1, order)
    cursor.pos = 8
    tensor_count = cursor.count()
    kv_count = cursor.count()
    metadata: dict[str, object] = {}
    tokens = ""
    for _ in range(kv_count):
        key = cursor.string()
        start = cursor.pos
        metadata[key] = cursor.value(cursor.u32())
        if key == TOKENS_KEY:
            tokens = hashlib.blake2b(data[start : cursor.pos], digest_size=16).hexdigest()
    if not with_tensors:
        return GGUFHeader(version, metadata, tensor_count, tokens=tokens)
    parameters = 0
    offsets: list[tuple[str, int]] = []
    for _ in range(tensor_count):
        name = cursor.string()
        dimensions = cursor.u32()
        if dimensions > _MAX_DIMENSIONS:
            raise _DamagedHeaderError(f"a tensor has {dimensions} dimensions")
        elements = 1
        for _ in range(dimensions):
            elements *= cursor.count()
        cursor.take(4)  # type
        offsets.append((name, cursor.u64()))
        parameters += elements
    # The tensors' data starts at the next multiple of the alignment after the header.
    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0:
        alignment = 32
    start = -(-cursor.pos // alignment) * alignment
    tensors = tuple((name, start + offset) for name, offset in offsets)
    return GGUFHeader(version, metadata, tensor_count, parameters, tensors, tokens)


def parse_gguf_header(data: bytes, name: str, *, with_tensors: bool = False) -> GGUFHeader:
    """Read a GGUF header from the first bytes of a file (a download's, say).

    Raises:
        HeaderCutShortError: ``data`` ends before the header does; more bytes may complete it.
        ModelLoadError: the header is damaged, naming ``name`` and how.
    """
    try:
        return _parse(data, with_tensors)
    except HeaderCutShortError:
        raise
    except (_DamagedHeaderError, ValueError, OverflowError, MemoryError) as exc:
        raise ModelLoadError(
            QT_TRANSLATE_NOOP("Floodgate", "The header of {name} cannot be read: {reason}"),
            name=name,
            reason=str(exc),
        ) from exc


def _read_header(path: Path, with_tensors: bool) -> GGUFHeader:
    check_model_file(path)
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise _DamagedHeaderError("it is empty")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _parse(data, with_tensors)
    except (_DamagedHeaderError, OSError, ValueError, OverflowError, MemoryError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ModelLoadError(
            QT_TRANSLATE_NOOP("Floodgate", "The header of {name} cannot be read: {reason}"),
            name=path.name,
            reason=reason,
        ) from exc


def read_gguf_header(
    path: Path, *, with_tensors: bool = True, timeout: float = FILE_TIMEOUT_S
) -> GGUFHeader:
    """Read ``path``'s GGUF header, within ``timeout`` seconds whatever the file is.

    Raises:
        ModelLoadError: the file is missing, not a regular file, not GGUF, does not answer,
            or its header is damaged.
    """
    return within_timeout(lambda: _read_header(path, with_tensors), path, timeout)


def read_chat_template(path: Path) -> str | None:
    """The chat template in ``path``'s header (``tokenizer.chat_template``), or None.

    Invalid UTF-8 anywhere in the header (the template included) is read with replacement
    characters, so the template is found even where llama-cpp-python's reader gives up.

    Raises:
        ModelLoadError: the file cannot be read as GGUF (see :func:`read_gguf_header`).
    """
    template = read_gguf_header(path, with_tensors=False).metadata.get(CHAT_TEMPLATE_KEY)
    return template if isinstance(template, str) else None


@dataclass(frozen=True)
class ModelCard:
    """A model file's description, as the model library lists it."""

    path: Path
    name: str
    architecture: str
    parameters: int | None
    quantization: str
    context_length: int | None
    size_bytes: int
    has_chat_template: bool
    projector: Path | None = None
    """The projector paired with it (an ``mmproj*.gguf`` beside it), which lets it see."""
    sees: bool = False
    """Its projector reads pictures."""
    hears: bool = False
    """Its projector reads sound."""
    vocabulary: str = ""
    """A digest of its vocabulary (:attr:`GGUFHeader.vocabulary`): models with the same one can
    draft for each other ("": not known)."""

    @property
    def is_projector(self) -> bool:
        """The file is a projector (a model's image or sound encoder), not a model."""
        return self.architecture == PROJECTOR_ARCHITECTURE


def _text(metadata: dict[str, object], key: str) -> str:
    value = metadata.get(key)
    return value if isinstance(value, str) else ""


def _number(metadata: dict[str, object], key: str) -> int | None:
    value = metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _quantization(file_type: int | None) -> str:
    if file_type is None:
        return ""
    from gguf import LlamaFileType  # imported here: it takes a moment to import

    try:
        return LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        return ""


def read_model_card(path: Path, timeout: float = FILE_TIMEOUT_S) -> ModelCard:
    """Describe ``path`` from its GGUF header (no weights are loaded).

    Raises:
        ModelLoadError: the only exception: the file is missing, not a regular file, not
            GGUF, does not answer within ``timeout`` seconds, or its header is damaged.
    """

    def describe() -> ModelCard:
        header = _read_header(path, with_tensors=True)
        metadata = header.metadata
        architecture = _text(metadata, "general.architecture")
        projector = find_projector(path) if architecture != PROJECTOR_ARCHITECTURE else None
        sees, hears = projector_senses(projector) if projector is not None else (False, False)
        return ModelCard(
            path=path,
            name=readable_name(path),
            architecture=architecture,
            parameters=header.parameters or None,
            quantization=_quantization(_number(metadata, "general.file_type")),
            context_length=_number(metadata, f"{architecture}.context_length"),
            size_bytes=path.stat().st_size,
            has_chat_template=isinstance(metadata.get(CHAT_TEMPLATE_KEY), str),
            projector=projector if sees or hears else None,
            sees=sees,
            hears=hears,
            vocabulary=header.vocabulary,
        )

    try:
        return within_timeout(describe, path, timeout)
    except ModelLoadError:
        raise
    except Exception as exc:
        # Whatever else goes wrong with one file is said about that file; the library
        # goes on with the others.
        raise ModelLoadError(
            QT_TRANSLATE_NOOP("Floodgate", "The header of {name} cannot be read: {reason}"),
            name=path.name,
            reason=exc,
        ) from exc


PROJECTOR_ARCHITECTURE = "clip"
"""``general.architecture`` of a projector file (llama.cpp's ``convert_hf_to_gguf.py``)."""


NO_PROJECTOR: Literal["none"] = "none"
"""A model's projector chosen as none: it opens for text only, whatever lies beside it."""

ProjectorChoice: TypeAlias = Path | Literal["none"] | None
"""The projector chosen by hand for a model: a file, :data:`NO_PROJECTOR`, or None (nothing
chosen: an ``mmproj*.gguf`` beside the model, if any, :func:`find_projector`)."""


def find_projector(model: Path) -> Path | None:
    """The projector that goes with ``model``: an ``mmproj*.gguf`` in the same folder.

    Hub repositories of vision models (SmolVLM, Gemma 3, Qwen-VL by ggml-org, unsloth,
    bartowski) put the projector beside the model as ``mmproj-<model>-<type>.gguf``, or
    ``mmproj-<type>.gguf``. In a folder of one model, its projector is the one whose name
    shares the longest start with the model's (after ``mmproj-``). In a folder of several
    (the downloads folder), a projector goes only with the model whose name it shares the
    most with, at least a few letters: ``mmproj-F16.gguf`` there belongs to no model in
    particular, and is paired with none.
    """
    try:
        ggufs = [p for p in model.parent.glob("*.gguf") if p.is_file()]
    except OSError:
        return None
    candidates = [p for p in ggufs if "mmproj" in p.name.lower() and p.resolve() != model.resolve()]
    if not candidates:
        return None
    models = [p for p in ggufs if "mmproj" not in p.name.lower()]
    best = max(sorted(candidates), key=lambda p: _shared(p, model))
    if len(models) <= 1:
        return best
    mine = _shared(best, model)
    if mine < _SHARED_AT_LEAST or any(_shared(best, other) > mine for other in models):
        return None
    return best


_SHARED_AT_LEAST = 4
"""Letters a projector's name must share with its model's in a folder of several models."""


def _shared(projector: Path, model: Path) -> int:
    """How many letters the projector's name (after ``mmproj-``) shares with the model's."""
    name = projector.stem.lower().replace("mmproj-", "").replace("mmproj", "")
    stem = model.stem.lower()
    return next(
        (i for i, (a, b) in enumerate(zip(name, stem, strict=False)) if a != b),
        min(len(name), len(stem)),
    )


def projector_senses(path: Path) -> tuple[bool, bool]:
    """Whether the projector at ``path`` reads pictures, and sound (from its header)."""
    try:
        metadata = _read_header(path, with_tensors=False).metadata
    except Exception:  # a damaged projector: the model opens without it, and says so
        log.warning("Projector %s unreadable", path.name)
        return False, False
    return senses(metadata)


def senses(metadata: dict[str, object]) -> tuple[bool, bool]:
    """Whether a header's file is a projector that reads pictures, and sound.

    (False, False): not a projector.
    """
    if _text(metadata, "general.architecture") != PROJECTOR_ARCHITECTURE:
        return False, False
    return (
        metadata.get("clip.has_vision_encoder") is True,
        metadata.get("clip.has_audio_encoder") is True,
    )


def short_count(n: int | None) -> str:
    """135M, 7.2B: a parameter count as people say it."""
    if n is None:
        return ""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _models_in(folder: Path) -> list[tuple[Path, Path]]:
    """The .gguf files in ``folder``: each by the path it is listed at, and the file it is.

    A link is listed by its own path, not its target's: a Hub cache's snapshot folder links
    ``model-Q4_K_M.gguf`` and ``mmproj-model-f16.gguf`` to blobs named by their hashes, and
    the model's name and its projector beside it are read from the link's folder.
    """
    if not folder.is_dir():
        return []
    return [(p.absolute(), p.resolve()) for p in sorted(folder.glob("*.gguf"))]


def _still_there(path: Path) -> tuple[Path, Path] | None:
    # Anything but a folder: a recent file that became a pipe is listed with a sentence.
    if path.exists() and not path.is_dir():
        return path.absolute(), path.resolve()
    return None


def find_models(
    folders: Iterable[Path], files: Sequence[Path] = (), timeout: float = FILE_TIMEOUT_S
) -> list[Path]:
    """The .gguf files in ``folders`` plus ``files`` that still exist; each file once, in order.

    A file reached by two paths (a link and its target) is listed once, by the first.
    A folder or file that does not answer within ``timeout`` seconds (a hung network mount)
    is left out, and logged; the others are listed.
    """
    found: list[tuple[Path, Path]] = []
    for folder in folders:
        try:
            found.extend(within_timeout(partial(_models_in, folder), folder, timeout))
        except (ModelLoadError, OSError) as exc:
            log.warning("models folder %s left out: %s", folder, exc)
    for file in files:
        try:
            there = within_timeout(partial(_still_there, file), file, timeout)
        except (ModelLoadError, OSError) as exc:
            log.warning("model file %s left out: %s", file, exc)
            continue
        if there is not None:
            found.append(there)
    unique: dict[Path, Path] = {}
    for path, target in found:
        unique.setdefault(target, path)
    return list(unique.values())
