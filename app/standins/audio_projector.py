"""An audio projector with random weights, written for the tests and the bench.

No audio model ships in a package, so the tests make one: a Qwen2-Audio-style projector (a
Whisper encoder: two 1-D convolutions over a log-mel spectrogram, a stack of transformer
blocks, a 2x average pool and a final layer norm, then one linear layer into the text
model's embedding width), in the GGUF layout the vendored libmtmd reads (keys and tensor
names from llama.cpp's ``tools/mtmd/clip-impl.h``; the tensors the ``qwen2a`` projector type
loads in ``clip.cpp``; the graph in ``tools/mtmd/models/whisper-enc.cpp``; the audio
preprocessing in ``tools/mtmd/mtmd-audio.cpp``). ``qwen2a`` is the simplest audio type there:
a Whisper encoder and a single ``mm.a.fc`` layer, with no frame stacking (``ultravox``,
``voxtral`` and ``meralion`` require ``clip.audio.projector.stack_factor``) and no extra norms.
Its output width is the default model's embedding width (SmolLM2-135M: 576), so the real
encoder and the real model run end to end. The weights are seeded noise: what the model then
says about a sound means nothing, but every step that a real audio model takes is taken.

libmtmd fixes the rest for this type: 16 kHz mono input (the helper's decoder resamples WAV,
MP3 and FLAC to it), a 400-point FFT with a hop of 160 samples (100 mel frames a second), and
the mel spectrogram cut into 30-second windows of 3,000 frames, the last one padded with
silence. Each window is one audio chunk of ``TOKENS_PER_WINDOW`` (750) embeddings, whatever
part of it the sound fills: a one-second clip costs as many positions as a 30-second one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

WINDOW_SECONDS = 30
"""The length of audio one chunk covers; shorter audio is padded with silence up to it."""

WINDOW_FRAMES = 3000
"""Mel frames in one window (100 a second): the encoder's input length, always."""

POSITIONS = WINDOW_FRAMES // 2
"""Encoder positions after the stride-2 convolution (Whisper's 1,500)."""

TOKENS_PER_WINDOW = POSITIONS // 2
"""Embeddings (text-model positions) one window becomes, after the 2x average pool."""


@dataclass(frozen=True)
class AudioShape:
    """The sizes of a test audio projector.

    Attributes:
        text_width: the text model's embedding width (the projector's output).
        width: the encoder's hidden width.
        blocks: encoder blocks (the graph runs all of them).
        heads: attention heads (must divide ``width``).
        mel_bins: mel filterbank channels (Whisper: 80, Qwen2-Audio: 128; libmtmd takes 1-256).
        seed: the random weights' seed.
    """

    text_width: int = 576
    width: int = 64
    blocks: int = 2
    heads: int = 4
    mel_bins: int = 80
    seed: int = 1

    @property
    def tokens_per_window(self) -> int:
        """How many embeddings one window of up to 30 seconds becomes."""
        return TOKENS_PER_WINDOW


LARGE = AudioShape(width=384, blocks=6, heads=6)
"""An encoder that takes a while on a CPU (1,500 positions through six blocks): for Stop."""


def write_audio_projector(path: Path, shape: AudioShape = AudioShape()) -> Path:
    """Write an audio projector GGUF of ``shape`` at ``path``; returns ``path``."""
    rng = np.random.default_rng(shape.seed)
    width, ffn = shape.width, shape.width * 4

    def weight(*dims: int, scale: float = 0.0) -> np.ndarray:
        fan_in = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        spread = scale or 1.0 / np.sqrt(fan_in)
        return (rng.standard_normal(dims) * spread).astype(np.float32)

    def zeros(*dims: int) -> np.ndarray:
        return np.zeros(dims, np.float32)

    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name("Floodgate test audio projector")
    writer.add_description("random weights, for tests: what the model says means nothing")
    writer.add_string("clip.projector_type", "qwen2a")
    writer.add_bool("clip.has_audio_encoder", True)
    audio = "clip.audio"
    writer.add_uint32(f"{audio}.embedding_length", width)
    writer.add_uint32(f"{audio}.feed_forward_length", ffn)
    writer.add_uint32(f"{audio}.block_count", shape.blocks)
    writer.add_uint32(f"{audio}.projection_dim", shape.text_width)
    writer.add_uint32(f"{audio}.attention.head_count", shape.heads)
    writer.add_float32(f"{audio}.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32(f"{audio}.num_mel_bins", shape.mel_bins)

    # numpy's shapes are ggml's dimensions reversed: (out, in) is ne = [in, out]; a conv1d
    # kernel (out, in, 3) is ne = [3, in, out]; its bias (out, 1) broadcasts over the frames.
    writer.add_tensor("a.conv1d.1.weight", weight(width, shape.mel_bins, 3))
    writer.add_tensor("a.conv1d.1.bias", zeros(width, 1))
    writer.add_tensor("a.conv1d.2.weight", weight(width, width, 3))
    writer.add_tensor("a.conv1d.2.bias", zeros(width, 1))
    writer.add_tensor("a.position_embd.weight", weight(POSITIONS, width, scale=0.02))
    for i in range(shape.blocks):
        block = f"a.blk.{i}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{block}.{name}.weight", weight(width, width))
            if name != "attn_k":  # Whisper's key projection has no bias; the graph checks
                writer.add_tensor(f"{block}.{name}.bias", zeros(width))
        for norm in ("ln1", "ln2"):
            writer.add_tensor(f"{block}.{norm}.weight", np.ones(width, np.float32))
            writer.add_tensor(f"{block}.{norm}.bias", zeros(width))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(ffn, width))
        writer.add_tensor(f"{block}.ffn_up.bias", zeros(ffn))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(width, ffn))
        writer.add_tensor(f"{block}.ffn_down.bias", zeros(width))
    writer.add_tensor("a.post_ln.weight", np.ones(width, np.float32))
    writer.add_tensor("a.post_ln.bias", zeros(width))
    # The projection into the text model's width; small outputs, like a text embedding's scale.
    writer.add_tensor("mm.a.fc.weight", weight(shape.text_width, width, scale=0.002))
    writer.add_tensor("mm.a.fc.bias", zeros(shape.text_width))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
