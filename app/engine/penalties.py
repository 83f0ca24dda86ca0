"""The repeat, frequency and presence penalties, applied to the penalised tokens only.

llama.cpp's penalties sampler looks every candidate up in its table of recent tokens: with
the whole vocabulary as candidates (it comes first in the chain) that is one hash lookup per
vocabulary entry per token, of which at most 64 can hit. With SmolLM2's 49,152 entries that
was 93 µs of a 126 µs ``llama_sampler_sample`` (33 µs without penalties), about 2 % of
two-thread decoding here, and more with larger vocabularies. This sampler keeps the same
recent tokens and applies the same arithmetic, in the same float32 steps, to those tokens
only, found by id: llama.cpp hands the first sampler the candidates in id order. If they are
not (another sampler came first), it falls back to a scan. The logits it leaves are bit for
bit llama.cpp's (``tests/engine/test_penalties.py``).

Each step is one float32 operation on float32 operands: Python computes it in double and the
store into the candidate array rounds it to float32, which gives the correctly rounded float32
result (a double holds more than twice float32's precision plus two bits, so the second
rounding never differs from a direct one).
"""

from __future__ import annotations

import ctypes
import struct
from collections import deque
from typing import Any

import llama_cpp

_FLOATS_PER_ENTRY = 3
"""``llama_token_data`` is an int32 id, a float logit and a float p: three 4-byte fields."""
assert ctypes.sizeof(llama_cpp.llama_token_data) == 4 * _FLOATS_PER_ENTRY

_F32 = struct.Struct("f")


def f32(value: float) -> float:
    """``value`` rounded to float32, as C stores it in a ``float``."""
    return float(_F32.unpack(_F32.pack(value))[0])


def only_lower(repeat: float, frequency: float, presence: float) -> bool:
    """Whether penalties at these values can only lower a logit, never raise one.

    A repeat penalty divides a positive logit and multiplies a negative one; the frequency and
    presence penalties are subtracted.
    """
    return f32(repeat) >= 1.0 and f32(frequency) >= 0.0 and f32(presence) >= 0.0


def is_neutral(repeat: float, frequency: float, presence: float) -> bool:
    """Whether penalties at these values change nothing (llama.cpp then skips them too)."""
    return f32(repeat) == 1.0 and f32(frequency) == 0.0 and f32(presence) == 0.0


class Penalties:
    """A llama.cpp sampler (for a chain) with llama.cpp's penalties over the last tokens.

    ``sampler`` belongs to the chain it is added to, which frees it; this object must outlive
    that chain (it holds the functions llama.cpp calls back).

    Args:
        last_n: how many of the latest accepted tokens count (0: none).
        repeat: logits of recent tokens are divided by this (multiplied, when not positive).
        frequency: subtracted once per occurrence among the recent tokens.
        presence: subtracted once from a token that occurred at all.
    """

    def __init__(self, last_n: int, repeat: float, frequency: float, presence: float) -> None:
        self._last_n = max(last_n, 0)
        self._repeat = f32(repeat)
        self._frequency = f32(frequency)
        self._presence = f32(presence)
        self._recent: deque[int] = deque()
        self._counts: dict[int, int] = {}
        iface = llama_cpp.llama_sampler_i()
        # The callbacks are kept on the interface: llama.cpp holds bare pointers to them.
        iface.accept = llama_cpp.llama_sampler_i_accept(self._accept)
        iface.apply = llama_cpp.llama_sampler_i_apply(self._apply)
        iface.reset = llama_cpp.llama_sampler_i_reset(self._reset)
        self._iface = iface
        self._iface_pointer = ctypes.pointer(iface)
        self.sampler: Any = llama_cpp.llama_sampler_init(self._iface_pointer, None)

    def _accept(self, _sampler: object, token: int) -> None:
        # llama_sampler_penalties_accept: a ring of the last tokens and their counts.
        if self._last_n == 0:
            return
        counts = self._counts
        counts[token] = counts.get(token, 0) + 1
        recent = self._recent
        if len(recent) >= self._last_n:
            old = recent.popleft()
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
        recent.append(token)

    def _reset(self, _sampler: object) -> None:
        self._recent.clear()
        self._counts.clear()

    def _apply(self, _sampler: object, candidates: Any) -> None:
        counts = self._counts
        if self._last_n == 0 or not counts:
            return
        array = candidates.contents
        size = int(array.size)
        ids = ctypes.cast(array.data, ctypes.POINTER(ctypes.c_int32))
        logits = ctypes.cast(array.data, ctypes.POINTER(ctypes.c_float))
        step = _FLOATS_PER_ENTRY
        if all(token < size and ids[token * step] == token for token in counts):
            places = [(token * step + 1, count) for token, count in counts.items()]
        else:
            places = [
                (i * step + 1, counts[ids[i * step]])
                for i in range(size)
                if ids[i * step] in counts
            ]
        repeat, frequency, presence = self._repeat, self._frequency, self._presence
        if frequency == 0.0 and presence == 0.0:
            # llama.cpp subtracts 0.0 then, which changes nothing (not even a -0.0).
            for place, _count in places:
                logit = logits[place]
                logits[place] = logit * repeat if logit <= 0 else logit / repeat
            array.sorted = False
            return
        for place, count in places:
            logit = logits[place]
            logit = f32(logit * repeat) if logit <= 0 else f32(logit / repeat)
            # float(count) * freq + float(count > 0) * present, each step in float32.
            logits[place] = logit - f32(f32(count * frequency) + presence)
        array.sorted = False
