"""A document as read, an attachment as kept, and the sentences for files that cannot be."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final, Literal

from app.sentence import QT_TRANSLATE_NOOP, Sentence

Kind = Literal["text", "code", "markdown", "csv", "json", "html", "pdf", "picture", "sound"]
KINDS: Final[tuple[Kind, ...]] = (
    "text",
    "code",
    "markdown",
    "csv",
    "json",
    "html",
    "pdf",
    "picture",
    "sound",
)
"""What an attachment is. A ``picture`` and a ``sound`` have no text: the file is kept by its
``digest`` (the data folder's ``pictures/`` or ``sounds/``) and goes to a model that sees or
hears through its projector."""

MEDIA_KINDS: Final = frozenset(("picture", "sound"))
"""The kinds whose file is kept by digest and read by a projector, not as text."""


NOT_FOUND: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} was not found: it may have been moved or deleted."
)
FOLDER: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} is a folder. Attach the files inside it instead."
)
NOT_A_FILE: Final = QT_TRANSLATE_NOOP(
    "Floodgate",
    "{name} is not an ordinary file (it is a pipe, a device or a socket), so it cannot be read.",
)
EMPTY: Final = QT_TRANSLATE_NOOP("Floodgate", "{name} is empty: there is nothing in it to read.")
TOO_LARGE: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} is {size}, larger than the {limit} an attachment may be."
)
NO_PERMISSION: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} cannot be read: you do not have permission to open it."
)
UNREADABLE: Final = QT_TRANSLATE_NOOP("Floodgate", "{name} could not be read: {reason}")
IMAGE: Final = QT_TRANSLATE_NOOP(
    "Floodgate",
    "{name} is an image. Floodgate reads the text of files: documents, source code and PDFs.",
)
BINARY: Final = QT_TRANSLATE_NOOP(
    "Floodgate",
    "{name} is not a text file or a PDF. Floodgate reads text, source code, Markdown, CSV, "
    "JSON, HTML and PDF files; save other documents as PDF or plain text first.",
)
ENCRYPTED_PDF: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} is a PDF locked with a password, so its text cannot be read."
)
IMAGE_ONLY_PDF: Final = QT_TRANSLATE_NOOP(
    "Floodgate",
    "{name} has no text to read: its pages are probably scanned images.",
)
DAMAGED_PDF: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "{name} could not be read as a PDF: the file may be damaged."
)
CANCELLED: Final = QT_TRANSLATE_NOOP("Floodgate", "Reading {name} was cancelled.")
NO_ROOM: Final = QT_TRANSLATE_NOOP(
    "Floodgate", "There is no room left in the context for any part of {name}."
)


class DocumentError(Exception):
    """A file could not be attached. ``sentence`` says why, in the user's words."""

    def __init__(self, template: str, **fields: object) -> None:
        self.sentence = Sentence(template, fields)
        super().__init__(str(self.sentence))


class ReadingCancelledError(DocumentError):
    """Reading stopped because the user cancelled it."""

    def __init__(self, name: str) -> None:
        super().__init__(CANCELLED, name=name)


@dataclass(frozen=True)
class Document:
    """A file's text, as read.

    Attributes:
        name: the file's name (no folder): what the user and the model see.
        kind: what sort of text it is.
        size: the file's size in bytes.
        text: the text, lines ending in a line feed; for HTML its visible text, for PDF the text of
            its pages.
        encoding: the encoding the bytes were decoded with (None for a PDF).
        pages: a PDF's page count (None otherwise).
        cut: only the start of the text is kept (:func:`~app.documents.prompt.cut_to_tokens`).
        kept_tokens: when cut, how many tokens of the text were kept.
        full_tokens: when cut, how many tokens the whole text was.
        digest: a picture's SHA-256 (hex), the name its file is kept under (None: not a
            picture).
    """

    name: str
    kind: Kind
    size: int
    text: str
    encoding: str | None = None
    pages: int | None = None
    cut: bool = False
    kept_tokens: int | None = None
    full_tokens: int | None = None
    digest: str | None = None


@dataclass(frozen=True)
class Attachment:
    """A document ready to go with a prompt, as plain data the store can keep.

    Attributes:
        tokens: what the attachment costs in the prompt, in the open model's tokens (the
            text as :func:`~app.documents.prompt.fenced_for_prompt` gives it to the model);
            None when no model was open to count them.

    The other attributes are :class:`Document`'s.
    """

    name: str
    kind: Kind
    size: int
    text: str
    tokens: int | None
    cut: bool = False
    encoding: str | None = None
    pages: int | None = None
    kept_tokens: int | None = None
    full_tokens: int | None = None
    digest: str | None = None

    @property
    def is_picture(self) -> bool:
        """A picture (its file kept by digest), not a text."""
        return self.kind == "picture"

    @property
    def is_sound(self) -> bool:
        """A sound (its file kept by digest), not a text."""
        return self.kind == "sound"

    @property
    def is_media(self) -> bool:
        """A picture or a sound: a file a projector reads, kept by digest."""
        return self.kind in MEDIA_KINDS

    @classmethod
    def from_document(cls, document: Document, tokens: int | None) -> Attachment:
        """The attachment of ``document``, which costs ``tokens`` in the prompt."""
        fields = asdict(document)
        return cls(tokens=tokens, **fields)

    def to_document(self) -> Document:
        """The document this attachment carries."""
        fields = asdict(self)
        del fields["tokens"]
        return Document(**fields)

    def to_dict(self) -> dict[str, object]:
        """The attachment as JSON-ready data (keys are the attribute names).

        ``digest`` only for a picture or a sound: a text's data is what it was before.
        """
        data = asdict(self)
        if data["digest"] is None:
            del data["digest"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Attachment:
        """An attachment from :meth:`to_dict`'s data (unknown keys ignored).

        Raises:
            ValueError: a field is missing or of the wrong type (an imported file is not
                trusted).
        """
        try:
            kind = data["kind"]
            if kind not in KINDS:
                raise ValueError(f"unknown attachment kind {kind!r}")
            name, text, size = data["name"], data["text"], data["size"]
            if not isinstance(name, str) or not isinstance(text, str):
                raise ValueError("an attachment's name and text are strings")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError("an attachment's size is a count of bytes")
            encoding = data.get("encoding")
            if encoding is not None and not isinstance(encoding, str):
                raise ValueError("an attachment's encoding is a string")
            digest = data.get("digest")
            if digest is not None and not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
                raise ValueError("an attachment's digest is 64 hexadecimal digits")
            if kind in MEDIA_KINDS and digest is None:
                raise ValueError(f"a {kind} has a digest")
            return cls(
                name=name,
                kind=kind,
                size=size,
                text=text,
                tokens=_count_or_none(data.get("tokens")),
                cut=bool(data.get("cut", False)),
                encoding=encoding,
                pages=_count_or_none(data.get("pages")),
                kept_tokens=_count_or_none(data.get("kept_tokens")),
                full_tokens=_count_or_none(data.get("full_tokens")),
                digest=digest,
            )
        except KeyError as missing:
            raise ValueError(f"an attachment has no {missing}") from None


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _count_or_none(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


# What kind of text a file holds, by its name. The content decides whether it is text at all.
_MARKDOWN = {".md", ".markdown", ".mdown", ".mkd", ".mkdn"}
_CSV = {".csv", ".tsv"}
_JSON = {".json", ".jsonl", ".ndjson", ".geojson", ".ipynb", ".jsonc"}
_HTML = {".html", ".htm", ".xhtml"}
_LANGUAGES: Final = {
    ".py": "python", ".pyi": "python", ".pyw": "python", ".js": "javascript",
    ".mjs": "javascript", ".cjs": "javascript", ".jsx": "jsx", ".ts": "typescript",
    ".tsx": "tsx", ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala",
    ".groovy": "groovy", ".gradle": "groovy", ".c": "c", ".h": "c", ".cc": "cpp",
    ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".cs": "csharp",
    ".go": "go", ".rs": "rust", ".rb": "ruby", ".php": "php", ".pl": "perl", ".pm": "perl",
    ".swift": "swift", ".m": "objectivec", ".mm": "objectivec", ".r": "r", ".jl": "julia",
    ".lua": "lua", ".sh": "bash", ".bash": "bash", ".zsh": "zsh", ".fish": "fish",
    ".ps1": "powershell", ".bat": "batch", ".cmd": "batch", ".sql": "sql", ".css": "css",
    ".scss": "scss", ".sass": "sass", ".less": "less", ".vue": "vue", ".svelte": "svelte",
    ".dart": "dart", ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml", ".fs": "fsharp",
    ".fsx": "fsharp", ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hrl": "erlang",
    ".clj": "clojure", ".cljs": "clojure", ".lisp": "lisp", ".el": "elisp", ".scm": "scheme",
    ".rkt": "racket", ".zig": "zig", ".nim": "nim", ".v": "verilog", ".sv": "systemverilog",
    ".vhd": "vhdl", ".vhdl": "vhdl", ".asm": "asm", ".s": "asm", ".f": "fortran",
    ".f90": "fortran", ".pas": "pascal", ".cmake": "cmake", ".mk": "make", ".proto": "protobuf",
    ".graphql": "graphql", ".tf": "hcl", ".nix": "nix", ".xml": "xml", ".svg": "xml",
    ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".ini": "ini", ".cfg": "ini",
    ".conf": "ini", ".properties": "properties", ".tex": "latex", ".diff": "diff",
    ".patch": "diff",
}  # fmt: skip
_CODE_NAMES: Final = {
    "makefile": "make", "gnumakefile": "make", "dockerfile": "dockerfile",
    "containerfile": "dockerfile", "cmakelists.txt": "cmake", "jenkinsfile": "groovy",
    "vagrantfile": "ruby", "gemfile": "ruby", "rakefile": "ruby",
}  # fmt: skip


def kind_of(name: str) -> Kind:
    """The kind of text a file of this name holds (``"text"`` when nothing more is known)."""
    lower = name.lower()
    suffix = Path(lower).suffix
    if suffix == ".pdf":
        return "pdf"
    if suffix in _MARKDOWN:
        return "markdown"
    if suffix in _CSV:
        return "csv"
    if suffix in _JSON:
        return "json"
    if suffix in _HTML:
        return "html"
    if suffix in _LANGUAGES or lower in _CODE_NAMES:
        return "code"
    return "text"


def language_of(name: str, kind: Kind) -> str:
    """The fence's info string for a file (a language name, or empty)."""
    lower = name.lower()
    if kind == "code":
        return _LANGUAGES.get(Path(lower).suffix) or _CODE_NAMES.get(lower, "")
    return {"markdown": "markdown", "csv": "csv", "json": "json"}.get(kind, "")


def seconds_to_read(tokens: int, prefill_rate: float | None) -> float | None:
    """How long the model takes to read ``tokens`` at ``prefill_rate`` tokens/s (None: unknown)."""
    if prefill_rate is None or prefill_rate <= 0:
        return None
    return tokens / prefill_rate
