"""Files to attach, made in the test's folder: PDFs with text, and a picture's first bytes.

PDFs are written with pypdf, with a text content stream built by hand, since pypdf draws no text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06"
"""The start of a 1 x 1 PNG: enough for a picture to be known by its content."""


def write_pdf(
    path: Path,
    pages: Sequence[Sequence[str]],
    *,
    password: str | None = None,
    owner: str | None = None,
) -> Path:
    """A PDF whose pages show these lines in Helvetica (a page without lines has no text)."""
    writer = PdfWriter()
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        if not lines:
            continue
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        shown = " ".join(f"({line}) '" for line in lines)  # ' : next line, then show
        content = DecodedStreamObject()
        content.set_data(f"BT /F1 12 Tf 72 720 Td 14 TL {shown} ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(content)
    if password is not None:
        writer.encrypt(password, owner, algorithm="AES-128")
    with path.open("wb") as file:
        writer.write(file)
    return path
