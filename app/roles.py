"""Who wrote a turn of a conversation.

One definition for the store (which keeps the turns) and the engine (whose chat template
receives them): the two may not import each other, and the same three words are meant.
"""

from __future__ import annotations

from typing import Literal

Role = Literal["system", "user", "assistant"]
