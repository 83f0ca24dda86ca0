"""A model's projector: what lets it see pictures (libmtmd), read once, and stopped inside.

A vision model is two files: the text model and its projector (``mmproj-*.gguf``), an image
encoder whose output is a run of embeddings in the text model's width. libmtmd (llama.cpp's
``tools/mtmd``, bound by llama-cpp-python's ``mtmd_cpp``) splits a prompt that holds media
markers into chunks: text (token ids) and images (a run of positions that the encoder's
embeddings fill).

Floodgate feeds those chunks itself rather than through llama-cpp-python's chat handlers,
which clear the KV cache and encode every image again on every turn:

- **A prompt with pictures is a token list like any other.** Each image's positions hold a
  placeholder id of its own (negative, so never a real token), the same for the same picture
  and projector. The engine's prefix reuse and prompt cache then cover turns with pictures
  unchanged: a follow-up shares the prefix, picture included, and nothing is encoded again.
- **Encoded once.** An image's embeddings are kept in RAM and on disk, keyed by the
  picture's hash and the projector's, so a conversation reopened after a restart does not
  encode them again either.
- **Stop inside the encoder.** The encoder has no abort callback (``llama_set_abort_callback``
  reaches ``llama_decode`` only). Its scheduler's eval callback does: asked node by node
  whether a result should be observed, the scheduler computes up to each observed node, calls
  back, and stops the graph when the callback returns false. The projector observes the end
  of every encoder block, so Stop lands within one block; an encode stopped that way leaves
  garbage, which is thrown away.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp
import llama_cpp._ggml as ggml
import llama_cpp.mtmd_cpp as mtmd
import numpy as np

from app.engine.pictures import Picture, PictureError, read_rgb
from app.sentence import QT_TRANSLATE_NOOP, Sentence

log = logging.getLogger(__name__)

MARKER = mtmd.mtmd_default_marker().decode("utf-8")
"""Where a picture goes in a rendered prompt: libmtmd's media marker."""

_CHUNK_IMAGE = 1  # MTMD_INPUT_CHUNK_TYPE_IMAGE
_CHUNK_AUDIO = 2  # MTMD_INPUT_CHUNK_TYPE_AUDIO

_RAM_PICTURES = 32
"""Encoded pictures kept in RAM (a few MB each for real projectors)."""

_TOKENS_PER_PICTURE = 256
"""What a picture is reckoned to take before one was laid out (Gemma 3's fixed 256)."""

_RAM_PIXELS_BYTES = 64 * 1024 * 1024
"""Decoded pictures kept in RAM, in all (3 bytes a pixel: 36 MB for a 12-megapixel photo)."""

_OBSERVED = (b"layer_out", b"ffn_out", b"attn_out")
"""Encoder nodes after which Stop is looked at (clip's graphs name each block's output)."""
_EVERY_NODES = 48
"""Where a graph names none of them: Stop is looked at every this many nodes."""

_get_name = ggml.libggml.ggml_get_name
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.c_void_p]

_EvalCallback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_bool, ctypes.c_void_p)


class ProjectorError(Exception):
    """A projector that cannot be used, with the sentence that says why."""

    def __init__(self, sentence: Sentence) -> None:
        super().__init__(str(sentence))
        self.sentence = sentence


class EncodeStoppedError(Exception):
    """Stop was pressed while a picture was encoded: nothing of it is kept."""


@dataclass(frozen=True)
class MediaRun:
    """The positions of one picture in a prompt's token list.

    Attributes:
        start: its first position.
        length: how many positions its embeddings fill.
        placeholder: the id its positions hold in the token list.
        picture: the picture.
        chunk_index: its chunk in the prompt's libmtmd chunks.
        tile: which of the picture's chunks it is (0 unless the projector cuts it in tiles).
    """

    start: int
    length: int
    placeholder: int
    picture: Picture
    chunk_index: int
    tile: int = 0

    @property
    def key(self) -> str:
        """What its embeddings are kept under: the picture's digest and the tile."""
        return f"{self.picture.digest}.{self.tile}"


class MediaPrompt:
    """A prompt with pictures: token ids (placeholders where pictures go) and their runs.

    Owns libmtmd's chunks (freed by :meth:`close`), which the runs point into.
    """

    def __init__(self, tokens: list[int], runs: list[MediaRun], chunks: Any) -> None:
        self.tokens = tokens
        self.runs = runs
        self._chunks = chunks

    def chunk(self, run: MediaRun) -> Any:
        """Libmtmd's chunk of ``run`` (valid until :meth:`close`)."""
        return mtmd.mtmd_input_chunks_get(self._chunks, run.chunk_index)

    def run_at(self, position: int) -> MediaRun | None:
        """The picture whose positions start at ``position``, if one does."""
        for run in self.runs:
            if run.start == position:
                return run
        return None

    def close(self) -> None:
        """Free libmtmd's chunks."""
        if self._chunks is not None:
            mtmd.mtmd_input_chunks_free(self._chunks)
            self._chunks = None


def placeholder(picture: Picture, projector_digest: str, occurrence: int, tile: int) -> int:
    """The id a picture's positions hold: negative (never a token).

    The same for the same picture, projector, place among the prompt's pictures and tile
    (a projector that cuts a large picture into tiles gives each its chunk), so a follow-up's
    token list matches the turn before; different for each of those, so two runs next to
    each other (the same picture twice, two tiles) never read as one.
    """
    text = f"{projector_digest}:{picture.digest}:{occurrence}:{tile}"
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


class Projector:
    """A projector opened beside a text model, used by the worker thread only.

    Args:
        path: the projector file.
        model: the text model (llama-cpp-python's ``llama_model`` pointer).
        n_threads: threads the encoder computes with.
        use_gpu: encode on the GPU when llama.cpp has one.
        cache_dir: where encoded pictures are kept on disk (None: RAM only).
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
        self._use_mrope = bool(mtmd.mtmd_decode_use_mrope(self._ctx))
        self._folder = cache_dir / self.digest if cache_dir is not None else None
        self._ram: OrderedDict[str, np.ndarray] = OrderedDict()
        self._pixels: OrderedDict[str, tuple[int, int, bytes]] = OrderedDict()
        self.encodes = 0
        """Pictures encoded since opening (the rest came from RAM or disk)."""
        self.tokens_per_picture = _TOKENS_PER_PICTURE
        """The most positions a picture took in a prompt laid out so far (an estimate first)."""
        self.last_encode_seconds = 0.0

    # -- prompts -------------------------------------------------------------------------

    def prompt(self, text: str, pictures: Sequence[Picture], add_special: bool) -> MediaPrompt:
        """Split a rendered prompt (one :data:`MARKER` per picture) into tokens and runs.

        Raises:
            PictureError: a picture could not be read.
            ProjectorError: libmtmd refused the prompt.
        """
        if self._use_mrope:
            raise ProjectorError(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "This projector places pictures in two dimensions (M-RoPE, as Qwen-VL "
                        "models do), which Floodgate does not support yet.",
                    )
                )
            )
        bitmaps: list[Any] = []
        try:
            for occurrence, picture in enumerate(pictures):
                bitmaps.append(self._bitmap(picture, occurrence))
        except BaseException:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
            raise
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            data = text.encode("utf-8")
            inp = mtmd.mtmd_input_text()
            inp.text = data
            inp.text_len = len(data)
            inp.add_special = add_special
            inp.parse_special = True
            array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            code = mtmd.mtmd_tokenize(self._ctx, chunks, ctypes.byref(inp), array, len(bitmaps))
        finally:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
        if code != 0:
            mtmd.mtmd_input_chunks_free(chunks)
            raise ProjectorError(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "The pictures could not be placed in the prompt (code {code})."
                    ),
                    {"code": code},
                )
            )
        try:
            return self._layout(chunks, pictures)
        except BaseException:
            mtmd.mtmd_input_chunks_free(chunks)
            raise

    def _layout(self, chunks: Any, pictures: Sequence[Picture]) -> MediaPrompt:
        tokens: list[int] = []
        runs: list[MediaRun] = []
        tiles: dict[int, int] = {}  # chunks seen so far of each picture's occurrence
        for index in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, index)
            kind = mtmd.mtmd_input_chunk_get_type(chunk)
            if kind in (_CHUNK_IMAGE, _CHUNK_AUDIO):
                n = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
                # Each bitmap's id is its place among the prompt's pictures (see prompt()).
                occurrence = int(mtmd.mtmd_input_chunk_get_id(chunk).decode("ascii"))
                picture = pictures[occurrence]
                tile = tiles.get(occurrence, 0)
                tiles[occurrence] = tile + 1
                mark = placeholder(picture, self.digest, occurrence, tile)
                runs.append(MediaRun(len(tokens), n, mark, picture, index, tile))
                if tile == 0:
                    self.tokens_per_picture = max(self.tokens_per_picture, n)
                else:  # a picture cut in tiles: all its tiles
                    tiled = sum(r.length for r in runs if r.picture is picture)
                    self.tokens_per_picture = max(self.tokens_per_picture, tiled)
                tokens.extend([mark] * n)
            else:
                count = ctypes.c_size_t(0)
                ids = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
                tokens.extend(ids[i] for i in range(count.value))
        return MediaPrompt(tokens, runs, chunks)

    def _bitmap(self, picture: Picture, occurrence: int) -> Any:
        # Each turn lays the whole conversation out again, pictures included: the decoded
        # pixels of the latest few are kept, so a follow-up does not decode them again.
        decoded = self._pixels.get(picture.digest)
        if decoded is None:
            decoded = read_rgb(picture.path)
            self._pixels[picture.digest] = decoded
            while len(self._pixels) > 1 and (
                sum(len(kept[2]) for kept in self._pixels.values()) > _RAM_PIXELS_BYTES
            ):
                self._pixels.popitem(last=False)
        self._pixels.move_to_end(picture.digest)
        width, height, rgb = decoded
        buffer = (ctypes.c_ubyte * len(rgb)).from_buffer_copy(rgb)
        bitmap = mtmd.mtmd_bitmap_init(width, height, buffer)
        mtmd.mtmd_bitmap_set_id(bitmap, str(occurrence).encode("ascii"))
        return bitmap

    # -- encoding ------------------------------------------------------------------------

    def embeddings(self, prompt: MediaPrompt, run: MediaRun) -> np.ndarray:
        """The picture's embeddings (rows of the text model's width), encoded at most once.

        Raises:
            EncodeStoppedError: Stop was pressed during the encode.
            ProjectorError: the encoder failed.
        """
        key = run.key
        found = self._ram.get(key)
        if found is not None and found.shape != (run.length, self._width):
            found = None  # kept for another layout of the picture (never decoded short)
        if found is None:
            found = self._read(key, run.length)
        if found is None:
            found = self._encode(prompt.chunk(run), run.length)
            self._write(key, found)
        self._ram[key] = found
        self._ram.move_to_end(key)
        while len(self._ram) > _RAM_PICTURES:
            self._ram.popitem(last=False)
        return found

    def _encode(self, chunk: Any, n_tokens: int) -> np.ndarray:
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
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "The picture could not be encoded (code {code})."
                    ),
                    {"code": code},
                )
            )
        self.encodes += 1
        pointer = mtmd.mtmd_get_output_embd(self._ctx)
        flat = np.ctypeslib.as_array(pointer, shape=(n_tokens * self._width,))
        return flat.reshape(n_tokens, self._width).copy()

    def forget_kept(self) -> None:
        """Forget the pictures encoded in RAM (the bench encodes the same one again)."""
        self._ram.clear()

    def stop_requested(self) -> Callable[[], None]:
        """What Stop calls: the encoder stops at its next observed node."""
        return self._hook.stop.set

    def lower_stop(self) -> None:
        """Ready the hook for the next reply."""
        self._hook.stop.clear()

    # -- the embeddings into the model ----------------------------------------------------

    def decode(
        self, lctx: Any, prompt: MediaPrompt, run: MediaRun, embd: np.ndarray, seq_id: int
    ) -> int:
        """Put a picture's embeddings into the KV cache at its positions (llama_decode's code).

        Stop reaches it through the context's own abort callback, as for text.
        """
        n_batch = int(llama_cpp.llama_n_batch(lctx))
        new_past = llama_cpp.llama_pos(0)
        data = np.ascontiguousarray(embd, dtype=np.float32)
        pointer = data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        return int(
            mtmd.mtmd_helper_decode_image_chunk(
                self._ctx,
                lctx,
                prompt.chunk(run),
                pointer,
                run.start,
                seq_id,
                n_batch,
                ctypes.byref(new_past),
                mtmd.mtmd_helper_post_decode_callback(),
                None,
            )
        )

    # -- the kept pictures -------------------------------------------------------------

    def _path(self, key: str) -> Path | None:
        return self._folder / f"{key}.npy" if self._folder is not None else None

    def _read(self, key: str, n_tokens: int) -> np.ndarray | None:
        path = self._path(key)
        if path is None or not path.exists():
            return None
        try:
            found: np.ndarray = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.warning("Kept picture %s unreadable (%s): encoding again", path.name, exc)
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
            log.warning("Could not keep the encoded picture on disk: %s", exc)
            if part is not None:
                with contextlib.suppress(OSError):
                    part.unlink(missing_ok=True)

    def close(self) -> None:
        """Free the encoder."""
        if self._ctx:
            mtmd.mtmd_free(self._ctx)
            self._ctx = None


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
    "MediaPrompt",
    "MediaRun",
    "Picture",
    "PictureError",
    "Projector",
    "ProjectorError",
]
