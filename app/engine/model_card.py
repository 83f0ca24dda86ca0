"""What a GGUF file holds, read from its metadata without loading the weights."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.engine.errors import QT_TRANSLATE_NOOP, ModelLoadError
from app.engine.model_file import check_model_file


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


def _value(reader: object, key: str) -> object:
    field = reader.fields.get(key)  # type: ignore[attr-defined]
    return None if field is None else field.contents()


def read_model_card(path: Path) -> ModelCard:
    """Read ``path``'s GGUF header (the gguf package memory-maps it; no weights are loaded).

    Raises:
        ModelLoadError: the file is missing, not GGUF, or its header cannot be read.
    """
    check_model_file(path)
    from gguf import GGUFReader, LlamaFileType  # imported here: it takes a moment to import

    try:
        reader = GGUFReader(path)
        architecture = str(_value(reader, "general.architecture") or "")
        file_type = _value(reader, "general.file_type")
        try:
            quantization = LlamaFileType(int(str(file_type))).name.removeprefix("MOSTLY_")
        except (TypeError, ValueError):
            quantization = ""
        context = _value(reader, f"{architecture}.context_length")
        parameters = sum(int(tensor.n_elements) for tensor in reader.tensors)
    except (ValueError, OSError, KeyError, IndexError) as exc:
        raise ModelLoadError(
            QT_TRANSLATE_NOOP("Floodgate", "The header of {name} cannot be read: {reason}"),
            name=path.name,
            reason=exc,
        ) from exc
    return ModelCard(
        path=path,
        name=str(_value(reader, "general.name") or path.stem),
        architecture=architecture,
        parameters=parameters or None,
        quantization=quantization,
        context_length=int(str(context)) if context is not None else None,
        size_bytes=path.stat().st_size,
        has_chat_template="tokenizer.chat_template" in reader.fields,
    )


def short_count(n: int | None) -> str:
    """135M, 7.2B: a parameter count as people say it."""
    if n is None:
        return ""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def find_models(folders: Iterable[Path], files: Sequence[Path] = ()) -> list[Path]:
    """The .gguf files in ``folders`` plus ``files`` that still exist; each once, in order."""
    found: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            found.extend(sorted(folder.glob("*.gguf")))
    found.extend(f for f in files if f.is_file())
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path.resolve(), None)
    return list(unique)
