"""Files attached to a prompt: their text, read safely, and how they reach the model.

No Qt here: the flow reads documents on a thread of its own (:mod:`app.flow.attachments`) and
the store keeps :class:`Attachment` as plain data (``to_dict``/``from_dict``), so neither the
reading nor the keeping needs the window.

Reading is defensive because the file comes from anywhere: only regular files are opened (a
FIFO would block the reader forever, a device never ends), the size is checked before a byte
is read, binary content is recognised by its bytes rather than by the name, and text in any
encoding is decoded by a charset detector, never into lone surrogates. Every refusal is a
:class:`DocumentError` carrying a sentence for the user.
"""

from __future__ import annotations

import contextlib
import html.parser
import io
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Final, Literal

import charset_normalizer
import pypdf
import pypdf.errors

from app.sentence import QT_TRANSLATE_NOOP, Sentence

Kind = Literal["text", "code", "markdown", "csv", "json", "html", "pdf"]
KINDS: Final[tuple[Kind, ...]] = ("text", "code", "markdown", "csv", "json", "html", "pdf")

MAX_ATTACHMENT_BYTES: Final = 64 * 2**20
"""The largest file an attachment may be. A text this size is some 16 million tokens, far past
any context; PDFs are large for their images, and 64 MB holds long illustrated reports."""

READ_CHUNK_BYTES: Final = 2**20
"""A file is read this much at a time, checking for Cancel between reads."""

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

CUT_MARKER: Final = "[cut: the first {kept} of {full} tokens of {name}; the rest is left out]"
"""What the model reads after a cut attachment. It is for the model, so it stays English."""


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
        cut: only the start of the text is kept (:func:`cut_to_tokens`).
        kept_tokens: when cut, how many tokens of the text were kept.
        full_tokens: when cut, how many tokens the whole text was.
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


@dataclass(frozen=True)
class Attachment:
    """A document ready to go with a prompt, as plain data the store can keep.

    Attributes:
        tokens: what the attachment costs in the prompt, in the open model's tokens (the
            text as :func:`fenced_for_prompt` gives it to the model); None when no model
            was open to count them.

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
        """The attachment as JSON-ready data (keys are the attribute names)."""
        return asdict(self)

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
            )
        except KeyError as missing:
            raise ValueError(f"an attachment has no {missing}") from None


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


def size_text(size: int) -> str:
    """A size in bytes as people read it: ``"812 B"``, ``"12 KB"``, ``"1.5 MB"``."""
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:,.0f} {unit}"
    return f"{size} B"


def seconds_to_read(tokens: int, prefill_rate: float | None) -> float | None:
    """How long the model takes to read ``tokens`` at ``prefill_rate`` tokens/s (None: unknown)."""
    if prefill_rate is None or prefill_rate <= 0:
        return None
    return tokens / prefill_rate


# Magic numbers: content that is not text whatever the file is called.
_IMAGE_MAGIC: Final = (
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",  # JPEG
    b"GIF87a",
    b"GIF89a",
    b"II*\x00",  # TIFF, little-endian
    b"MM\x00*",  # TIFF, big-endian
    b"8BPS",  # Photoshop
    b"\x00\x00\x01\x00",  # ICO
    b"\xff\x0a",  # JPEG XL codestream
    b"\x00\x00\x00\x0cJXL ",
)
_IMAGE_BRANDS: Final = (b"heic", b"heix", b"hevc", b"mif1", b"msf1", b"avif", b"avis")
_BINARY_MAGIC: Final = (
    b"PK\x03\x04",  # ZIP: also .docx, .xlsx, .odt, .epub
    b"\x1f\x8b",  # gzip
    b"BZh",
    b"\xfd7zXZ\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!\x1a\x07",
    b"\x28\xb5\x2f\xfd",  # zstd
    b"\x7fELF",
    b"MZ",  # Windows executables
    b"\xca\xfe\xba\xbe",  # Java class, Mach-O fat
    b"\xcf\xfa\xed\xfe",  # Mach-O
    b"\x00asm",
    b"SQLite format 3\x00",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",  # old Office documents
    b"ID3",  # MP3
    b"OggS",
    b"fLaC",
    b"GGUF",
)
_BOMS: Final = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def _is_image(head: bytes) -> bool:
    if head.startswith(_IMAGE_MAGIC):
        return True
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return True
    if head[4:8] == b"ftyp" and head[8:12] in _IMAGE_BRANDS:
        return True
    # A bitmap: "BM", the file size, then four reserved zero bytes.
    return head[:2] == b"BM" and head[6:10] == b"\x00\x00\x00\x00"


def _is_pdf(head: bytes) -> bool:
    # Readers accept the header anywhere in the first kilobyte; so do we.
    return b"%PDF-" in head[:1024]


def read_document(
    path: Path,
    *,
    max_bytes: int = MAX_ATTACHMENT_BYTES,
    cancelled: Callable[[], bool] = lambda: False,
    progress: Callable[[int, int], None] | None = None,
) -> Document:
    """Read the text of the file at ``path``.

    Runs for as long as the file takes: call it off the UI thread.

    Args:
        path: the file.
        max_bytes: refuse files larger than this.
        cancelled: asked between reads and between a PDF's pages; True stops the reading.
        progress: called with (done, total): pages of a PDF, bytes of anything else.

    Raises:
        ReadingCancelledError: ``cancelled()`` became true.
        DocumentError: the file cannot be attached; its sentence says why.
    """
    name = path.name or str(path)
    data = _read_bytes(path, name, max_bytes, cancelled, progress)
    head = data[:1024]
    if _is_pdf(head):
        return _read_pdf(data, name, cancelled, progress)
    if _is_image(head):
        raise DocumentError(IMAGE, name=name)
    if kind_of(name) == "pdf" and not _looks_like_text(data):
        raise DocumentError(DAMAGED_PDF, name=name)
    if head.startswith(_BINARY_MAGIC):
        raise DocumentError(BINARY, name=name)
    text, encoding = _decode(data, name)
    kind = kind_of(name)
    if kind == "pdf":  # called .pdf, but text inside: read it as the text it is
        kind = "text"
    if kind == "html":
        text = visible_text(text)
    text = _clean(text)
    if not text.strip():
        raise DocumentError(EMPTY, name=name)
    return Document(name=name, kind=kind, size=len(data), text=text, encoding=encoding)


def _read_bytes(
    path: Path,
    name: str,
    max_bytes: int,
    cancelled: Callable[[], bool],
    progress: Callable[[int, int], None] | None,
) -> bytes:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DocumentError(NOT_FOUND, name=name) from None
    except PermissionError:
        raise DocumentError(NO_PERMISSION, name=name) from None
    except OSError as error:
        raise DocumentError(UNREADABLE, name=name, reason=error.strerror or error) from None
    _check_regular(info, name, max_bytes)
    if cancelled():
        raise ReadingCancelledError(name)
    # Non-blocking: should the path have become a FIFO since stat(), opening it still returns
    # at once (and fstat() below refuses it) instead of waiting for a writer forever.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise DocumentError(NOT_FOUND, name=name) from None
    except PermissionError:
        raise DocumentError(NO_PERMISSION, name=name) from None
    except OSError as error:
        raise DocumentError(UNREADABLE, name=name, reason=error.strerror or error) from None
    with os.fdopen(fd, "rb", buffering=0) as file:
        _check_regular(os.fstat(fd), name, max_bytes)
        chunks: list[bytes] = []
        done = 0
        expected = max(info.st_size, 1)
        while True:
            if cancelled():
                raise ReadingCancelledError(name)
            try:
                chunk = file.read(READ_CHUNK_BYTES)
            except OSError as error:
                raise DocumentError(UNREADABLE, name=name, reason=error.strerror or error) from None
            if not chunk:
                break
            done += len(chunk)
            if done > max_bytes:  # the file grew since stat()
                raise DocumentError(
                    TOO_LARGE, name=name, size=size_text(done), limit=size_text(max_bytes)
                )
            chunks.append(chunk)
            if progress is not None and not _is_pdf(chunks[0][:1024]):
                progress(min(done, expected), expected)
    if done == 0:
        raise DocumentError(EMPTY, name=name)
    return b"".join(chunks)


def _check_regular(info: os.stat_result, name: str, max_bytes: int) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise DocumentError(FOLDER, name=name)
    if not stat.S_ISREG(info.st_mode):
        raise DocumentError(NOT_A_FILE, name=name)
    if info.st_size == 0:
        raise DocumentError(EMPTY, name=name)
    if info.st_size > max_bytes:
        raise DocumentError(
            TOO_LARGE, name=name, size=size_text(info.st_size), limit=size_text(max_bytes)
        )


def _looks_like_text(data: bytes) -> bool:
    return b"\x00" not in data[:8192] and not data.startswith(_BINARY_MAGIC)


def _decode(data: bytes, name: str) -> tuple[str, str]:
    for bom, codec in _BOMS:
        if data.startswith(bom):
            # The BOM settles the encoding; a broken unit becomes U+FFFD, never a surrogate.
            return data[len(bom) :].decode(codec, errors="replace"), codec.removesuffix("-sig")
    if b"\x00" in data:
        raise DocumentError(BINARY, name=name)
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    results = charset_normalizer.from_bytes(data)
    best = results.best()
    if best is None:  # no encoding makes sense of it: binary
        raise DocumentError(BINARY, name=name)
    # The detector scores Western European text the same in cp1250, cp1252, iso8859-10...
    # and then returns the first it tried (cp1250: "très" becomes "trčs"). Among the
    # encodings it finds about as good, take the most widely used one.
    tied = [
        match
        for match in results
        if match.chaos <= best.chaos + _TIE and match.coherence >= best.coherence - _TIE
    ]
    for preferred in _PREFERRED_ENCODINGS:
        for match in tied:
            if preferred == match.encoding or preferred in match.could_be_from_charset:
                with contextlib.suppress(UnicodeDecodeError, LookupError):
                    return data.decode(preferred), preferred
    return str(best), best.encoding


_TIE: Final = 0.05
"""Scores this close are a tie: on a short text a few odd letters move the score this much."""

_PREFERRED_ENCODINGS: Final = (
    "cp1252",
    "latin_1",
    "iso8859_15",
    "cp1250",
    "iso8859_2",
    "gb18030",
    "big5",
    "shift_jis",
    "euc_kr",
    "cp1251",
    "koi8_r",
)
"""Legacy encodings by how widely they are used, to choose among equally likely ones."""


_LINE_ENDS = re.compile(r"\r\n?")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    text = _LINE_ENDS.sub("\n", text.removeprefix("\ufeff")).replace("\x00", "")
    # Decoders used here do not produce lone surrogates; this keeps it true whatever a
    # library hands back, since SQLite and Qt both reject them.
    return _SURROGATES.sub("\ufffd", text)


def _read_pdf(
    data: bytes,
    name: str,
    cancelled: Callable[[], bool],
    progress: Callable[[int, int], None] | None,
) -> Document:
    # pypdf raises many kinds of exception on malformed files (its own, and ValueError,
    # KeyError, TypeError... from deep inside); any of them means "not a readable PDF".
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _unlock(reader):
            raise DocumentError(ENCRYPTED_PDF, name=name)
        pages = reader.pages
        total = len(pages)
    except DocumentError:
        raise
    except Exception:
        raise DocumentError(DAMAGED_PDF, name=name) from None
    texts: list[str] = []
    failures = 0
    if progress is not None:
        progress(0, total)
    for number in range(total):
        if cancelled():
            raise ReadingCancelledError(name)
        try:
            texts.append(pages[number].extract_text() or "")
        except Exception:  # one bad page loses that page, not the document
            failures += 1
            texts.append("")
        if progress is not None:
            progress(number + 1, total)
    text = _clean("\n\n".join(t.strip("\n") for t in texts))
    if total == 0 or failures == total:
        raise DocumentError(DAMAGED_PDF, name=name)
    if not text.strip():
        raise DocumentError(IMAGE_ONLY_PDF, name=name)
    return Document(name=name, kind="pdf", size=len(data), text=text, pages=total)


def _unlock(reader: pypdf.PdfReader) -> bool:
    """Open a PDF encrypted with an empty user password (the common "restricted" PDF)."""
    try:
        return reader.decrypt("") != pypdf.PasswordType.NOT_DECRYPTED
    except (pypdf.errors.PyPdfError, NotImplementedError):
        # DependencyError (no AES library) and unknown security handlers: unreadable to us.
        return False


class _VisibleText(html.parser.HTMLParser):
    """The text a browser shows for an HTML page: paragraphs apart, list items on lines."""

    # Not "head": pages often leave it open, and what it holds besides the title is hidden
    # anyway (scripts, styles) or has no text (meta, link).
    _HIDDEN: Final = frozenset({"script", "style", "template", "noscript"})
    _PARAGRAPHS: Final = frozenset(
        {
            "address", "article", "aside", "blockquote", "details", "dl", "figure", "footer",
            "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "nav", "ol", "p",
            "pre", "section", "table", "ul",
        }
    )  # fmt: skip
    _LINES: Final = frozenset({"dd", "div", "dt", "figcaption", "li", "summary", "tr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._hidden = 0
        self._pre = 0
        self._in_title = False
        self._newlines = 2  # the start is the start of a paragraph

    def _break(self, newlines: int) -> None:
        """End the text so far with at least this many line feeds."""
        if self.parts and self._newlines == 0:
            self.parts[-1] = self.parts[-1].rstrip(" ")
        missing = max(0, newlines - self._newlines)
        self.parts.append("\n" * missing)
        self._newlines += missing

    def _block(self, tag: str) -> None:
        if tag in self._PARAGRAPHS:
            self._break(2)
        elif tag in self._LINES:
            self._break(1)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._HIDDEN:
            self._hidden += 1
        elif tag == "br":
            self._break(self._newlines + 1)
        elif tag in ("td", "th") and self._newlines == 0:
            self.parts.append("\t")
        else:
            self._block(tag)
        if tag == "pre":
            self._pre += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br":
            self._break(self._newlines + 1)
        else:
            self._block(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        else:
            self._block(tag)
        if tag == "pre":
            self._pre = max(0, self._pre - 1)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._hidden:
            return
        elif self._pre:
            if data:
                self.parts.append(data)
                self._newlines = len(data) - len(data.rstrip("\n"))
        else:
            # HTML's white space only: a no-break space is text.
            data = _HTML_SPACE.sub(" ", data)
            if self._newlines:
                data = data.lstrip(" ")
            if data:
                self.parts.append(data)
                self._newlines = 0


_HTML_SPACE: Final = re.compile(r"[ \t\n\r\f]+")


def visible_text(markup: str) -> str:
    """The visible text of an HTML page: no tags, scripts, styles or comments."""
    parser = _VisibleText()
    with contextlib.suppress(AssertionError):  # html.parser's own complaints on broken markup
        parser.feed(markup)
        parser.close()
    body = "".join(parser.parts).rstrip(" ")
    text = re.sub(r"\n{3,}", "\n\n", body).strip("\n")
    title = _HTML_SPACE.sub(" ", parser.title).strip()
    if title and not text.startswith(title):
        text = f"{title}\n\n{text}" if text else title
    return text


def _printable_name(name: str) -> str:
    # A name is one line the model reads as a name: no newlines or other control characters.
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029]+", " ", name).strip() or "attachment"


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text`` (three at least)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def fenced_for_prompt(document: Document | Attachment) -> str:
    """The attachment as the model receives it inside the user's turn.

    The file name on a line, the content in a fence that nothing in it can close, and, when
    only the start of the text is kept, a marker saying how much.
    """
    name = _printable_name(document.name)
    text = document.text
    fence = fence_for(text)
    language = language_of(document.name, document.kind)
    body = text if text.endswith("\n") or not text else text + "\n"
    lines = [f"File: {name}", f"{fence}{language}", f"{body}{fence}"]
    if document.cut:
        kept = document.kept_tokens if document.kept_tokens is not None else "?"
        full = document.full_tokens if document.full_tokens is not None else "?"
        lines.append(
            CUT_MARKER.format(
                kept=f"{kept:,}" if isinstance(kept, int) else kept,
                full=f"{full:,}" if isinstance(full, int) else full,
                name=name,
            )
        )
    return "\n".join(lines)


def content_with_attachments(attachments: Iterable[Document | Attachment], question: str) -> str:
    """A user turn's content: each attachment fenced, in order, then the question."""
    parts = [fenced_for_prompt(attachment) for attachment in attachments]
    parts.append(question)
    return "\n\n".join(parts)


def cut_to_tokens(document: Document, tokens: int, count_tokens: Callable[[str], int]) -> Document:
    """The document with only as much of its start as fits in ``tokens``.

    ``tokens`` is the room for the whole attachment as the model receives it
    (:func:`fenced_for_prompt`: name, fence and cut marker included). The cut falls at the end
    of a line where that loses little, so the model does not read half a line.

    Args:
        document: the document (already cut or not).
        tokens: the room, in tokens.
        count_tokens: the open model's token count of a text (called about 20 times, with
            texts up to the document's length: call this off the UI thread).

    Returns:
        ``document`` itself when it fits whole; otherwise a copy marked cut.

    Raises:
        DocumentError: not even the name and an empty fence fit.
    """
    if count_tokens(fenced_for_prompt(document)) <= tokens:
        return document
    text = document.text
    full = document.full_tokens if document.cut and document.full_tokens else count_tokens(text)

    def with_prefix(prefix: str, kept: int) -> Document:
        return replace(document, text=prefix, cut=True, kept_tokens=kept, full_tokens=full)

    def fits(length: int) -> bool:
        # The marker is priced with ``kept == full``: the real one can only be as long.
        return count_tokens(fenced_for_prompt(with_prefix(text[:length], full))) <= tokens

    if not fits(0):
        raise DocumentError(NO_ROOM, name=document.name)
    # Binary search for the longest prefix that fits, starting from a guess by proportion so
    # that the texts counted are not much longer than the answer.
    low, high = 0, len(text)
    guess = min(high, int(len(text) * tokens / max(full, 1) * 1.25) + 64)
    if not fits(guess):
        high = guess - 1
    else:
        low = guess
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    prefix = text[:low]
    line_end = prefix.rfind("\n")
    if line_end >= 0 and line_end + 1 >= len(prefix) * 0.8:
        prefix = prefix[: line_end + 1]
    return with_prefix(prefix, count_tokens(prefix))


def cut_attachment(
    attachment: Attachment, tokens: int, count_tokens: Callable[[str], int]
) -> Attachment:
    """:func:`cut_to_tokens` for an attachment; its ``tokens`` counted again."""
    document = cut_to_tokens(attachment.to_document(), tokens, count_tokens)
    if not document.cut:
        return attachment
    return Attachment.from_document(document, count_tokens(fenced_for_prompt(document)))
