"""Files attached to a prompt: their text, read safely, and how they reach the model.

No Qt here: the flow reads documents on a thread of its own (:mod:`app.flow.attachments`) and
the store keeps :class:`Attachment` as plain data (``to_dict``/``from_dict``), so neither the
reading nor the keeping needs the window.

Reading is defensive because the file comes from anywhere: only regular files are opened (a
FIFO would block the reader forever, a device never ends), the size is checked before a byte
is read, binary content is recognised by its bytes rather than by the name, and text in any
encoding is decoded by a charset detector, never into lone surrogates. Every refusal is a
:class:`DocumentError` carrying a sentence for the user.

The parts: :mod:`~app.documents.document` (a document, an attachment, their kinds and the
sentences of refusal), :mod:`~app.documents.reading` (a file read safely, told apart by its
bytes), :mod:`~app.documents.encodings` (text in any encoding), :mod:`~app.documents.pdf`,
:mod:`~app.documents.html_text` (the visible text of a page) and :mod:`~app.documents.prompt`
(fenced for the model, cut to the room there is).
"""

from app.documents.document import (
    KINDS,
    Attachment,
    Document,
    DocumentError,
    Kind,
    ReadingCancelledError,
    kind_of,
    language_of,
    seconds_to_read,
)
from app.documents.html_text import visible_text
from app.documents.prompt import (
    content_with_attachments,
    cut_attachment,
    cut_to_tokens,
    fence_for,
    fenced_for_prompt,
)
from app.documents.reading import MAX_ATTACHMENT_BYTES, read_document
from app.sentence import size_text

__all__ = [
    "KINDS",
    "MAX_ATTACHMENT_BYTES",
    "Attachment",
    "Document",
    "DocumentError",
    "Kind",
    "ReadingCancelledError",
    "content_with_attachments",
    "cut_attachment",
    "cut_to_tokens",
    "fence_for",
    "fenced_for_prompt",
    "kind_of",
    "language_of",
    "read_document",
    "seconds_to_read",
    "size_text",
    "visible_text",
]
