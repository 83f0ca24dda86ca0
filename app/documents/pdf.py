"""The text of a PDF, page by page (pypdf), and why a PDF cannot be read."""

from __future__ import annotations

import io
from collections.abc import Callable

import pypdf
import pypdf.errors

from app.documents.document import (
    DAMAGED_PDF,
    ENCRYPTED_PDF,
    IMAGE_ONLY_PDF,
    Document,
    DocumentError,
    ReadingCancelledError,
)
from app.documents.encodings import clean


def read_pdf(
    data: bytes,
    name: str,
    cancelled: Callable[[], bool],
    progress: Callable[[int, int], None] | None,
) -> Document:
    """The text of the PDF ``data``, its pages apart.

    Raises:
        ReadingCancelledError: ``cancelled()`` became true between pages.
        DocumentError: the PDF is locked, damaged or has no text.
    """
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
    text = clean("\n\n".join(t.strip("\n") for t in texts))
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
