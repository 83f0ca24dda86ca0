"""A model's projector: what lets it see pictures and hear sounds (libmtmd), read once, stopped.

A vision or audio model is two files: the text model and its projector (``mmproj-*.gguf``), an
image or audio encoder whose output is a run of embeddings in the text model's width. libmtmd
(llama.cpp's ``tools/mtmd``, bound by llama-cpp-python's ``mtmd_cpp``) splits a prompt that
holds media markers into chunks: text (token ids), images and audio (runs of positions that the
encoder's embeddings fill). A sound is cut into 30-second windows by Whisper-style encoders,
a chunk each, as a large picture is cut into tiles.

Floodgate feeds those chunks itself rather than through llama-cpp-python's chat handlers,
which clear the KV cache and encode every image again on every turn:

- **A prompt with pictures or sounds is a token list like any other.** Each chunk's positions
  hold a placeholder id of its own (negative, so never a real token), the same for the same
  picture or sound and projector. The engine's prefix reuse and prompt cache then cover turns
  with media unchanged: a follow-up shares the prefix, media included, and nothing is encoded
  again.
- **Encoded once.** A chunk's embeddings are kept in RAM and on disk, keyed by the file's
  hash (and the chunk's place in it) and the projector's, so a conversation reopened after a
  restart does not encode them again either.
- **Stop inside the encoder.** The encoder has no abort callback (``llama_set_abort_callback``
  reaches ``llama_decode`` only). Its scheduler's eval callback does: asked node by node
  whether a result should be observed, the scheduler computes up to each observed node, calls
  back, and stops the graph when the callback returns false. The projector observes the end
  of every encoder block, so Stop lands within one block; an encode stopped that way leaves
  garbage, which is thrown away. The same hook reaches the audio encoder (a Whisper graph
  names its blocks' outputs as clip's vision graphs do).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import llama_cpp
import llama_cpp._ggml as ggml
import llama_cpp.mtmd_cpp as mtmd
import numpy as np

from app.engine.pictures import Picture, PictureError, read_rgb
from app.engine.sounds import (
    TOKENS_PER_WINDOW,
    Sound,
    SoundError,
    check_sound,
    estimate_tokens,
    sniff,
    unreadable,
)
from app.sentence import QT_TRANSLATE_NOOP, Sentence

log = logging.getLogger(__name__)

MARKER = mtmd.mtmd_default_marker().decode("utf-8")
"""Where a picture or a sound goes in a rendered prompt: libmtmd's media marker."""

Media = Picture | Sound
"""What a projector reads: a picture, a sound."""

_CHUNK_IMAGE = 1  # MTMD_INPUT_CHUNK_TYPE_IMAGE
_CHUNK_AUDIO = 2  # MTMD_INPUT_CHUNK_TYPE_AUDIO

_RAM_EMBEDDINGS_BYTES = 256 * 1024 * 1024
"""Encoded chunks kept in RAM, in all: a picture is a few MB for real projectors, a sound's
30-second window 2-11 MB (750 rows of the text model's width), so a count would not do."""

_TOKENS_PER_PICTURE = 256
"""What a picture is reckoned to take before one was laid out (Gemma 3's fixed 256)."""

_RAM_PIXELS_BYTES = 64 * 1024 * 1024
"""Decoded pictures kept in RAM, in all (3 bytes a pixel: 36 MB for a 12-megapixel photo)."""

_RAM_SAMPLES_BYTES = 64 * 1024 * 1024
"""Decoded sounds kept in RAM, in all (16 kHz float samples: 38 MB for ten minutes)."""

_RAM_SOUND_WINDOWS_BYTES = 64 * 1024 * 1024
"""Sounds' windows as laid out (their spectrograms), kept in RAM, in all."""

_WINDOW_BYTES = 128 * 3000 * 4
"""A window's spectrogram, at most: 128 mel bands by 3,000 frames of floats (1.5 MB)."""

_SOUND_LENGTHS = 1024
"""Sounds whose positions in a prompt are remembered (for the context's fit: a few ints)."""

_OBSERVED = (b"layer_out", b"ffn_out", b"attn_out", b"after_conv1d", b"Vcur", b"kqv_out", b"ffn_up")
"""Encoder nodes after which Stop is looked at (clip's graphs, vision and Whisper, name them).

Each block's outputs, and points inside it: attention and feed-forward are each a long step,
and a Whisper encoder's two convolutions come before any block. With the block's outputs
alone, Stop at the start of the test audio encoder's 0.6-s encode waited 90 ms for the first
one; with these, 35 ms at worst (the attention itself), and the encode took no longer."""
_EVERY_NODES = 48
"""Where a graph names none of them: Stop is looked at every this many nodes."""

_get_name = ggml.libggml.ggml_get_name
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.c_void_p]

_Value = TypeVar("_Value")

_EvalCallback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_bool, ctypes.c_void_p)


class ProjectorError(Exception):
    """A projector that cannot be used, with the sentence that says why."""

    def __init__(self, sentence: Sentence) -> None:
        super().__init__(str(sentence))
        self.sentence = sentence


class EncodeStoppedError(Exception):
    """Stop was pressed while a picture or a sound was encoded: nothing of it is kept."""


@dataclass(frozen=True)
class MediaRun:
    """The positions of one chunk of a picture or a sound in a prompt's token list.

    Attributes:
        start: its first position.
        length: how many positions its embeddings fill.
        placeholder: the id its positions hold in the token list.
        media: the picture or the sound.
        chunk_index: its chunk in the prompt's libmtmd chunks (-1: it has ``chunk``).
        tile: which of the item's chunks it is (0 unless the projector cuts a picture in
            tiles, or a sound in 30-second windows).
    """

    start: int
    length: int
    placeholder: int
    media: Media
    chunk_index: int
    tile: int = 0
    chunk: Any = field(default=None, compare=False, repr=False)
    """A chunk of its own (a sound's window laid out before), owned by the prompt; else
    ``chunk_index`` in the prompt's chunks."""

    @property
    def key(self) -> str:
        """What its embeddings are kept under: the file's digest and the tile."""
        return f"{self.media.digest}.{self.tile}"

    @property
    def is_sound(self) -> bool:
        """Whether it is a sound's (else a picture's)."""
        return isinstance(self.media, Sound)


class MediaPrompt:
    """A prompt with pictures or sounds: token ids (placeholders where they go) and their runs.

    Owns libmtmd's chunks (freed by :meth:`close`), which the runs point into.
    """

    def __init__(self, tokens: list[int], runs: list[MediaRun], chunks: Any) -> None:
        self.tokens = tokens
        self.runs = runs
        self._chunks = chunks
        self._closed = False
        self.encoded: set[str] = set()
        """Digests of the pictures and sounds encoded (not found kept) for this prompt."""

    def chunk(self, run: MediaRun) -> Any:
        """Libmtmd's chunk of ``run`` (valid until :meth:`close`)."""
        if run.chunk is not None:
            return run.chunk
        return mtmd.mtmd_input_chunks_get(self._chunks, run.chunk_index)

    def run_at(self, position: int) -> MediaRun | None:
        """The chunk whose positions start at ``position``, if one does."""
        for run in self.runs:
            if run.start == position:
                return run
        return None

    def close(self) -> None:
        """Free libmtmd's chunks (the prompt's, and the copies its runs own)."""
        if self._closed:
            return
        self._closed = True
        if self._chunks is not None:
            mtmd.mtmd_input_chunks_free(self._chunks)
        for run in self.runs:
            if run.chunk is not None:
                mtmd.mtmd_input_chunk_free(run.chunk)


def placeholder(media: Media, projector_digest: str, occurrence: int, tile: int) -> int:
    """The id a chunk's positions hold: negative (never a token).

    The same for the same picture or sound, projector, place among the prompt's media and
    tile (a projector that cuts a large picture into tiles, or a sound into windows, gives
    each its chunk), so a follow-up's token list matches the turn before; different for each
    of those, so two runs next to each other (the same picture twice, two tiles) never read
    as one.
    """
    text = f"{projector_digest}:{media.digest}:{occurrence}:{tile}"
    key = hashlib.sha256(text.encode()).digest()
    return -1 - int.from_bytes(key[:4], "little") % (2**31 - 2)


def file_digest(path: Path) -> str:
    """A digest of a projector file that changes when the file does (name, size, head, tail)."""
    stat = path.stat()
    hasher = hashlib.sha256(f"{path.name}:{stat.st_size}".encode())
    with path.open("rb") as handle:
        hasher.update(handle.read(1 << 20))
        if stat.st_size > 1 << 21:
            handle.seek(-(1 << 20), os.SEEK_END)
            hasher.update(handle.read(1 << 20))
    return hasher.hexdigest()[:32]


class _StopHook:
    """The encoder's eval callback: observe each block's end; there, go on unless stopped."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.observed = 0
        self._nodes = 0
        self.callback = _EvalCallback(self._call)

    def _call(self, tensor: int, ask: bool, _data: int) -> bool:
        if not ask:
            self.observed += 1
            return not self.stop.is_set()
        self._nodes += 1
        name = _get_name(tensor) or b""
        return bool(name.startswith(_OBSERVED) or self._nodes % _EVERY_NODES == 0)


class _Kept(Generic[_Value]):
    """The latest values used, in RAM, as many as fit a budget of bytes (at least one)."""

    def __init__(
        self,
        budget: int,
        size: Callable[[_Value], int],
        drop: Callable[[_Value], object] = lambda _value: None,
    ) -> None:
        self._budget = budget
        self._size = size
        self._drop = drop  # what a value forgotten needs (libmtmd's chunks are freed)
        self._values: OrderedDict[str, _Value] = OrderedDict()
        self._bytes = 0

    def get(self, key: str) -> _Value | None:
        """The value kept under ``key`` (now the latest used), if one is."""
        value = self._values.get(key)
        if value is not None:
            self._values.move_to_end(key)
        return value

    def put(self, key: str, value: _Value) -> None:
        """Keep ``value`` under ``key``, forgetting the least recently used past the budget."""
        old = self._values.pop(key, None)
        if old is not None:
            self._bytes -= self._size(old)
            self._drop(old)
        self._values[key] = value
        self._bytes += self._size(value)
        while len(self._values) > 1 and self._bytes > self._budget:
            _, dropped = self._values.popitem(last=False)
            self._bytes -= self._size(dropped)
            self._drop(dropped)

    def clear(self) -> None:
        """Forget every value."""
        for value in self._values.values():
            self._drop(value)
        self._values.clear()
        self._bytes = 0


class _Bitmaps:
    """Libmtmd's bitmaps of pictures and sounds, from their decoded contents kept in RAM.

    Each turn lays the whole conversation out again, its media included: the decoded pixels
    and samples of the latest few are kept, so a follow-up does not read and decode them again
    (and a sound laid out before is not given to libmtmd again: :class:`_LaidOutSounds`).
    """

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._pixels: _Kept[tuple[int, int, bytes]] = _Kept(_RAM_PIXELS_BYTES, lambda p: len(p[2]))
        self._samples: _Kept[bytes] = _Kept(_RAM_SAMPLES_BYTES, len)

    def make(self, item: Media, occurrence: int) -> Any:
        """A bitmap of ``item``, its id its place among the prompt's media (raises its error)."""
        bitmap = self._sound(item) if isinstance(item, Sound) else self._picture(item)
        mtmd.mtmd_bitmap_set_id(bitmap, str(occurrence).encode("ascii"))
        return bitmap

    def _picture(self, picture: Picture) -> Any:
        decoded = self._pixels.get(picture.digest)
        if decoded is None:
            decoded = read_rgb(picture.path)
            self._pixels.put(picture.digest, decoded)
        width, height, rgb = decoded
        buffer = (ctypes.c_ubyte * len(rgb)).from_buffer_copy(rgb)
        return mtmd.mtmd_bitmap_init(width, height, buffer)

    def _sound(self, sound: Sound) -> Any:
        samples = self._samples.get(sound.digest)
        if samples is not None:
            count = len(samples) // ctypes.sizeof(ctypes.c_float)
            floats = (ctypes.c_float * count).from_buffer_copy(samples)
            return mtmd.mtmd_bitmap_init_from_audio(count, floats)
        # Checked first (its format by its first bytes, its length by its header): the helper
        # hands what it takes for neither a picture nor a sound to ffprobe, as a video.
        check_sound(sound.path)
        try:
            with sound.path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                data = (ctypes.c_uint8 * size)()
                got = handle.readinto(data)
        except OSError as exc:
            raise SoundError(
                Sentence(
                    QT_TRANSLATE_NOOP("Floodgate", "{name} could not be read: {reason}"),
                    {"name": sound.path.name, "reason": exc.strerror or exc},
                )
            ) from None
        if got != size or sniff(bytes(data[:16])) is None:  # changed since it was checked
            raise SoundError(unreadable(sound.path))
        # libmtmd's helper decodes WAV, MP3 and FLAC itself (miniaudio), resampled to its rate.
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(self._ctx, data, size, False)
        if not bitmap:
            raise SoundError(unreadable(sound.path))
        if not mtmd.mtmd_bitmap_is_audio(bitmap):
            mtmd.mtmd_bitmap_free(bitmap)
            raise SoundError(unreadable(sound.path))
        n_bytes = int(mtmd.mtmd_bitmap_get_n_bytes(bitmap))
        samples = ctypes.string_at(mtmd.mtmd_bitmap_get_data(bitmap), n_bytes)
        self._samples.put(sound.digest, samples)
        return bitmap


class _LaidOutSounds:
    """The windows of the latest sounds as libmtmd laid them out (their spectrograms).

    Each turn lays the whole conversation out again; for a sound that computes its
    spectrogram again (about 45 ms per 30-second window here, 1.5 s for ten minutes),
    whatever is kept of its embeddings. A sound's windows follow each other with nothing
    between them, and the text libmtmd puts around them (``<|audio_bos|>``...) does not
    depend on the sound, so a sound laid out before is laid out again from copies of its
    windows: in a prompt of such sounds only, the text between them is tokenized as libmtmd
    does (each part on its own) and nothing is computed; beside pictures or new sounds, it
    is given to libmtmd as a tenth of a second of silence (one window's spectrogram) whose
    window is replaced by its own.
    """

    STAND_IN = 1600
    """The stand-in's samples (0.1 s at 16 kHz): one window."""

    def __init__(self, ctx: Any, model: Any) -> None:
        self._ctx = ctx
        vocab = llama_cpp.llama_model_get_vocab(model)
        add_bos, add_eos = llama_cpp.llama_vocab_get_add_bos, llama_cpp.llama_vocab_get_add_eos
        self.bos = [int(llama_cpp.llama_vocab_bos(vocab))] if add_bos(vocab) else []
        self.eos = [int(llama_cpp.llama_vocab_eos(vocab))] if add_eos(vocab) else []
        self.around: tuple[list[int], list[int]] | None = None
        """The tokens libmtmd puts before a sound's windows and after them (once learnt)."""
        self._windows: _Kept[tuple[Any, ...]] = _Kept(
            _RAM_SOUND_WINDOWS_BYTES, lambda w: len(w) * _WINDOW_BYTES, _free_chunks
        )

    def known(self, sound: Sound) -> tuple[Any, ...] | None:
        """The sound's windows, if it was laid out before (valid until the next :meth:`keep`)."""
        return self._windows.get(sound.digest)

    def stand_in(self, occurrence: int) -> Any:
        """The bitmap given to libmtmd in place of a sound laid out before."""
        bitmap = mtmd.mtmd_bitmap_init_from_audio(self.STAND_IN, (ctypes.c_float * self.STAND_IN)())
        mtmd.mtmd_bitmap_set_id(bitmap, str(occurrence).encode("ascii"))
        return bitmap

    def keep(self, sound: Sound, windows: Sequence[Any]) -> None:
        """Keep copies of a sound's windows, just laid out (the first learns what goes around)."""
        self._windows.put(sound.digest, tuple(mtmd.mtmd_input_chunk_copy(w) for w in windows))
        if self.around is None:
            chunks = _tokenize(self._ctx, MARKER, [self.stand_in(0)], False, [])
            try:
                kinds = [
                    mtmd.mtmd_input_chunk_get_type(mtmd.mtmd_input_chunks_get(chunks, i))
                    for i in range(mtmd.mtmd_input_chunks_size(chunks))
                ]
                sounds = [i for i, kind in enumerate(kinds) if kind == _CHUNK_AUDIO]
                before = [_text_of(chunks, i) for i in range(sounds[0])]
                after = [_text_of(chunks, i) for i in range(sounds[-1] + 1, len(kinds))]
                self.around = ([t for part in before for t in part], [t for p in after for t in p])
            finally:
                mtmd.mtmd_input_chunks_free(chunks)

    def text(self, part: str, media: Sequence[Media]) -> list[int]:
        """The tokens of a part of the prompt between ``media``, as libmtmd tokenizes it."""
        chunks = _tokenize(self._ctx, part, [], False, media)
        try:
            return [
                t for i in range(mtmd.mtmd_input_chunks_size(chunks)) for t in _text_of(chunks, i)
            ]
        finally:
            mtmd.mtmd_input_chunks_free(chunks)

    def clear(self) -> None:
        """Free every copy."""
        self._windows.clear()


def _tokenize(
    ctx: Any, text: str, bitmaps: list[Any], add_special: bool, media: Sequence[Media]
) -> Any:
    """Libmtmd's chunks of ``text``, ``bitmaps`` (freed here) at its markers.

    Raises:
        ProjectorError: libmtmd refused the prompt (``media``: what it holds, to say so).
    """
    chunks = mtmd.mtmd_input_chunks_init()
    data = text.encode("utf-8")
    inp = mtmd.mtmd_input_text()
    inp.text, inp.text_len, inp.add_special, inp.parse_special = data, len(data), add_special, True
    array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
    try:
        code = mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(inp), array, len(bitmaps))
    finally:
        for bitmap in bitmaps:
            mtmd.mtmd_bitmap_free(bitmap)
    if code != 0:
        mtmd.mtmd_input_chunks_free(chunks)
        raise ProjectorError(_unplaced(media, code))
    return chunks


def _text_of(chunks: Any, index: int) -> list[int]:
    """The token ids of chunk ``index`` if it is text (else none)."""
    chunk = mtmd.mtmd_input_chunks_get(chunks, index)
    if mtmd.mtmd_input_chunk_get_type(chunk) in (_CHUNK_IMAGE, _CHUNK_AUDIO):
        return []
    count = ctypes.c_size_t(0)
    ids = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
    return [ids[i] for i in range(count.value)]


class _KeptEmbeddings:
    """Encoded chunks, kept in RAM (the latest used) and on disk (``folder``, if any), by key.

    On disk as ``<key>.npy``, written to a temporary name, synced, then renamed; a file that
    cannot be read, or of another shape, is removed (the chunk is encoded again).
    """

    def __init__(self, folder: Path | None, width: int) -> None:
        self._folder = folder
        self._width = width
        self.ram: _Kept[np.ndarray] = _Kept(_RAM_EMBEDDINGS_BYTES, lambda a: int(a.nbytes))

    def get(self, key: str, n_tokens: int) -> np.ndarray | None:
        """The embeddings kept under ``key``, if they have ``n_tokens`` rows."""
        found = self.ram.get(key)
        if found is not None and found.shape != (n_tokens, self._width):
            found = None  # kept for another layout of the item (never decoded short)
        return found if found is not None else self._read(key, n_tokens)

    def put(self, key: str, embd: np.ndarray, *, on_disk: bool = False) -> None:
        """Keep ``embd`` in RAM, and on disk too when it was just encoded."""
        self.ram.put(key, embd)
        if on_disk:
            self._write(key, embd)

    def _path(self, key: str) -> Path | None:
        return self._folder / f"{key}.npy" if self._folder is not None else None

    def _read(self, key: str, n_tokens: int) -> np.ndarray | None:
        path = self._path(key)
        if path is None or not path.exists():
            return None
        try:
            found: np.ndarray = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.warning("Kept embeddings %s unreadable (%s): encoding again", path.name, exc)
            path.unlink(missing_ok=True)
            return None
        if found.shape != (n_tokens, self._width) or found.dtype != np.float32:
            path.unlink(missing_ok=True)
            return None
        return found

    def _write(self, key: str, embd: np.ndarray) -> None:
        path = self._path(key)
        if path is None:
            return
        part: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as out:
                part = Path(out.name)
                np.save(out, embd, allow_pickle=False)
                out.flush()
                os.fsync(out.fileno())
            os.replace(part, path)
        except OSError as exc:  # a full disk costs the next restart an encode, nothing more
            log.warning("Could not keep the encoded embeddings on disk: %s", exc)
            if part is not None:
                with contextlib.suppress(OSError):
                    part.unlink(missing_ok=True)


def _free_chunks(chunks: tuple[Any, ...]) -> None:
    for chunk in chunks:
        mtmd.mtmd_input_chunk_free(chunk)


class Projector:
    """A projector opened beside a text model, used by the worker thread only.

    Args:
        path: the projector file.
        model: the text model (llama-cpp-python's ``llama_model`` pointer).
        n_threads: threads the encoder computes with.
        use_gpu: encode on the GPU when llama.cpp has one.
        cache_dir: where encoded pictures and sounds are kept on disk (None: RAM only).
        stop_hook: let Stop reach the encoder (off: the bench's comparison only).

    Raises:
        ProjectorError: the file is not a projector libmtmd reads, or not one for this model.
    """

    def __init__(
        self,
        path: Path,
        model: Any,
        n_threads: int,
        *,
        use_gpu: bool = False,
        cache_dir: Path | None = None,
        stop_hook: bool = True,
    ) -> None:
        self.path = path
        try:
            self.digest = file_digest(path)
        except OSError as exc:  # moved, deleted, unreadable since it was chosen
            raise ProjectorError(
                Sentence(
                    QT_TRANSLATE_NOOP("Floodgate", "The projector {name} cannot be read: {reason}"),
                    {"name": path.name, "reason": exc.strerror or str(exc)},
                )
            ) from exc
        self._hook = _StopHook()
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = max(1, n_threads)
        params.print_timings = False
        params.warmup = True
        if stop_hook:  # off only for the bench, which measures what the hook costs
            params.cb_eval = ctypes.cast(self._hook.callback, type(params.cb_eval))
        self._ctx = mtmd.mtmd_init_from_file(str(path).encode("utf-8"), model, params)
        if not self._ctx:
            raise ProjectorError(_refusal(path))
        self.sees = bool(mtmd.mtmd_support_vision(self._ctx))
        self.hears = bool(mtmd.mtmd_support_audio(self._ctx))
        self._width = int(llama_cpp.llama_model_n_embd_inp(model))
        self.spans: dict[int, int] | None = {} if mtmd.mtmd_decode_use_mrope(self._ctx) else None
        """For a text model whose positions are M-RoPE (Qwen-VL's, Qwen 3.5's): the positions
        each picture chunk laid out so far takes, by its placeholder id, which are fewer than
        its embeddings (see :class:`~app.engine.sequence.KvSequence`). None: every other."""
        folder = cache_dir / self.digest if cache_dir is not None else None
        self._kept = _KeptEmbeddings(folder, self._width)
        self._bitmaps = _Bitmaps(self._ctx)
        self._laid_out = _LaidOutSounds(self._ctx, model)
        # Counted as one each: the latest _SOUND_LENGTHS sounds' lengths.
        self._sound_lengths: _Kept[int] = _Kept(_SOUND_LENGTHS, lambda _length: 1)
        self._window_tokens: int | None = None
        self.encodes = 0
        """Chunks encoded since opening (pictures, their tiles, sounds' windows; the rest came
        from RAM or disk)."""
        self.tokens_per_picture = _TOKENS_PER_PICTURE
        """The most positions a picture took in a prompt laid out so far (an estimate first)."""
        self.last_encode_seconds = 0.0

    # -- prompts -------------------------------------------------------------------------

    def prompt(self, text: str, media: Sequence[Media], add_special: bool) -> MediaPrompt:
        """Split a rendered prompt (one :data:`MARKER` per item of ``media``) into tokens and runs.

        Raises:
            PictureError: a picture could not be read.
            SoundError: a sound could not be read.
            ProjectorError: libmtmd refused the prompt.
        """
        known = {
            i: windows
            for i, item in enumerate(media)
            if isinstance(item, Sound) and (windows := self._laid_out.known(item)) is not None
        }
        if known and len(known) == len(media) and self._laid_out.around is not None:
            return self._again(text, media, known, add_special)
        bitmaps: list[Any] = []
        try:
            for occurrence, item in enumerate(media):
                if occurrence in known:
                    bitmaps.append(self._laid_out.stand_in(occurrence))
                else:
                    bitmaps.append(self._bitmaps.make(item, occurrence))
        except BaseException:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
            raise
        chunks = _tokenize(self._ctx, text, bitmaps, add_special, media)
        prompt = MediaPrompt([], [], chunks)
        try:
            self._layout(prompt, chunks, media, known)
        except BaseException:
            prompt.close()
            raise
        return prompt

    def _layout(
        self, prompt: MediaPrompt, chunks: Any, media: Sequence[Media], known: dict[int, Any]
    ) -> None:
        """Fill ``prompt`` with ``chunks``' tokens and runs.

        ``known``: the windows of sounds laid out before, by their place among ``media``; each
        replaces its stand-in's window.
        """
        tokens, runs = prompt.tokens, prompt.runs
        tiles: dict[int, int] = {}  # chunks seen so far of each item's occurrence
        for index in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, index)
            kind = mtmd.mtmd_input_chunk_get_type(chunk)
            if kind in (_CHUNK_IMAGE, _CHUNK_AUDIO):
                # Each bitmap's id is its place among the prompt's media (see prompt()).
                occurrence = int(mtmd.mtmd_input_chunk_get_id(chunk).decode("ascii"))
                item = media[occurrence]
                windows = known.get(occurrence)
                if windows is None:
                    self._place(prompt, item, occurrence, tiles, index, None)
                elif occurrence not in tiles:  # the stand-in's window (one, 0.1 s long)
                    for window in windows:
                        copy = mtmd.mtmd_input_chunk_copy(window)
                        self._place(prompt, item, occurrence, tiles, -1, copy)
            else:
                tokens.extend(_text_of(chunks, index))
        # Sounds laid out here for the first time are kept for the next turn (after the
        # layout: keeping may forget the windows of another sound of this prompt).
        for occurrence, item in enumerate(media):
            if isinstance(item, Sound) and occurrence not in known:
                mine = [r for r in runs if r.media is item and r.chunk_index >= 0]
                if mine and all(a.start + a.length == b.start for a, b in itertools.pairwise(mine)):
                    self._laid_out.keep(item, [prompt.chunk(r) for r in mine])

    def _again(
        self, text: str, media: Sequence[Media], known: dict[int, Any], add_special: bool
    ) -> MediaPrompt:
        """A prompt of sounds laid out before, laid out from their windows: see _LaidOutSounds."""
        laid_out = self._laid_out
        assert laid_out.around is not None
        before, after = laid_out.around
        prompt = MediaPrompt(list(laid_out.bos if add_special else []), [], None)
        tiles: dict[int, int] = {}
        try:
            for occurrence, part in enumerate(text.split(MARKER)):
                prompt.tokens.extend(laid_out.text(part, media))
                if occurrence < len(media):
                    prompt.tokens.extend(before)
                    for window in known[occurrence]:
                        copy = mtmd.mtmd_input_chunk_copy(window)
                        self._place(prompt, media[occurrence], occurrence, tiles, -1, copy)
                    prompt.tokens.extend(after)
        except BaseException:
            prompt.close()
            raise
        prompt.tokens.extend(laid_out.eos if add_special else [])
        return prompt

    def _place(
        self,
        prompt: MediaPrompt,
        item: Media,
        occurrence: int,
        tiles: dict[int, int],
        index: int,
        chunk: Any,
    ) -> None:
        """Add one chunk of ``item`` to ``prompt`` (its own ``chunk``, or the one at ``index``)."""
        tile = tiles.get(occurrence, 0)
        tiles[occurrence] = tile + 1
        mark = placeholder(item, self.digest, occurrence, tile)
        start = len(prompt.tokens)
        run = MediaRun(start, 0, mark, item, index, tile, chunk)
        chunk = prompt.chunk(run)
        n = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        if self.spans is not None and not isinstance(item, Sound):
            # A sound's positions go one by one under M-RoPE too; a picture's do not.
            self.spans[mark] = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
        prompt.runs.append(replace(run, length=n))
        self._measure(prompt.runs, item, n)
        prompt.tokens.extend([mark] * n)

    def _measure(self, runs: list[MediaRun], item: Media, n: int) -> None:
        """Note what ``item``'s chunks take (the last of ``runs`` is its latest, of ``n``)."""
        # All of its chunks so far: the tiles of a picture, the windows of a sound.
        whole = sum(r.length for r in runs if r.media is item)
        if isinstance(item, Sound):
            self._window_tokens = max(self._window_tokens or 0, n)
            self._sound_lengths.put(item.digest, whole)
        else:
            self.tokens_per_picture = max(self.tokens_per_picture, whole)

    @property
    def tokens_per_window(self) -> int:
        """The positions a sound's chunk takes, as measured in a prompt laid out so far.

        A chunk is 30 seconds for Whisper-style encoders; Qwen2-Audio's 750 before one was.
        """
        return self._window_tokens or TOKENS_PER_WINDOW

    def sound_tokens(self, sound: Sound) -> int:
        """The positions ``sound`` takes in a prompt: as laid out before, else reckoned.

        Reckoned from its length (:func:`~app.engine.sounds.estimate_tokens`, which reads its
        header) and :attr:`tokens_per_window`.
        """
        known = self._sound_lengths.get(sound.digest)
        return known if known is not None else estimate_tokens(sound.path, self.tokens_per_window)

    # -- encoding ------------------------------------------------------------------------

    def embeddings(self, prompt: MediaPrompt, run: MediaRun) -> np.ndarray:
        """The chunk's embeddings (rows of the text model's width), encoded at most once.

        Raises:
            EncodeStoppedError: Stop was pressed during the encode.
            ProjectorError: the encoder failed.
        """
        found = self._kept.get(run.key, run.length)
        if found is None:
            found = self._encode(prompt.chunk(run), run)
            prompt.encoded.add(run.media.digest)
            self._kept.put(run.key, found, on_disk=True)
        else:
            self._kept.put(run.key, found)  # now the latest used
        return found

    def _encode(self, chunk: Any, run: MediaRun) -> np.ndarray:
        hook = self._hook
        hook.observed = 0
        started = time.perf_counter()
        code = mtmd.mtmd_encode_chunk(self._ctx, chunk)
        self.last_encode_seconds = time.perf_counter() - started
        if hook.stop.is_set():
            raise EncodeStoppedError
        if code != 0:
            raise ProjectorError(
                Sentence(
                    QT_TRANSLATE_NOOP("Floodgate", "The sound could not be encoded (code {code}).")
                    if run.is_sound
                    else QT_TRANSLATE_NOOP(
                        "Floodgate", "The picture could not be encoded (code {code})."
                    ),
                    {"code": code},
                )
            )
        self.encodes += 1
        n_tokens = run.length
        pointer = mtmd.mtmd_get_output_embd(self._ctx)
        flat = np.ctypeslib.as_array(pointer, shape=(n_tokens * self._width,))
        return flat.reshape(n_tokens, self._width).copy()

    def forget_kept(self) -> None:
        """Forget the chunks encoded in RAM (the bench encodes the same one again)."""
        self._kept.ram.clear()

    def stop_requested(self) -> Callable[[], None]:
        """What Stop calls: the encoder stops at its next observed node."""
        return self._hook.stop.set

    def lower_stop(self) -> None:
        """Ready the hook for the next reply."""
        self._hook.stop.clear()

    # -- the embeddings into the model ----------------------------------------------------

    def decode(
        self,
        lctx: Any,
        prompt: MediaPrompt,
        run: MediaRun,
        embd: np.ndarray,
        seq_id: int,
        position: int,
    ) -> int:
        """Put a chunk's embeddings into the KV cache from ``position`` (llama_decode's code).

        Stop reaches it through the context's own abort callback, as for text.
        """
        n_batch = int(llama_cpp.llama_n_batch(lctx))
        new_past = llama_cpp.llama_pos(0)
        data = np.ascontiguousarray(embd, dtype=np.float32)
        pointer = data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        return int(
            mtmd.mtmd_helper_decode_image_chunk(  # audio chunks too, despite its name
                self._ctx,
                lctx,
                prompt.chunk(run),
                pointer,
                position,
                seq_id,
                n_batch,
                ctypes.byref(new_past),
                mtmd.mtmd_helper_post_decode_callback(),
                None,
            )
        )

    def close(self) -> None:
        """Free the encoder."""
        self._laid_out.clear()
        if self._ctx:
            mtmd.mtmd_free(self._ctx)
            self._ctx = None


def _unplaced(media: Sequence[Media], code: int) -> Sentence:
    """Why libmtmd could not lay the prompt out, named by what the prompt holds."""
    sounds = any(isinstance(item, Sound) for item in media)
    pictures = any(not isinstance(item, Sound) for item in media)
    if sounds and pictures:
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The pictures and sounds could not be placed in the prompt (code {code})."
        )
    elif sounds:
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The sounds could not be placed in the prompt (code {code})."
        )
    else:
        template = QT_TRANSLATE_NOOP(
            "Floodgate", "The pictures could not be placed in the prompt (code {code})."
        )
    return Sentence(template, {"code": code})


def _refusal(path: Path) -> Sentence:
    """Why libmtmd refused ``path`` (its log says which; the sentence names the likely causes)."""
    return Sentence(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "{name} could not be opened as this model's projector: it was made for another "
            "model, or the file is damaged, or it is not a projector this version of llama.cpp "
            "reads. Choose the projector that came with the model.",
        ),
        {"name": path.name},
    )


__all__ = [
    "MARKER",
    "EncodeStoppedError",
    "Media",
    "MediaPrompt",
    "MediaRun",
    "Picture",
    "PictureError",
    "Projector",
    "ProjectorError",
    "Sound",
    "SoundError",
]
