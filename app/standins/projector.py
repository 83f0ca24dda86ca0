"""A vision projector with random weights, written for the tests and the bench.

No vision model ships in a package, so the tests make one: a LLaVA-style projector (a ViT
encoder, then a two-layer MLP into the text model's embedding width), in the GGUF layout the
vendored libmtmd reads (keys and tensor names from llama.cpp's ``tools/mtmd/clip-impl.h``;
the tensors the ``mlp`` projector type loads in ``clip.cpp``; the graph in
``tools/mtmd/models/llava.cpp``). Its output width is the default model's embedding width
(SmolLM2-135M: 576), so the real encoder and the real model run end to end. The weights are
seeded noise: what the model then says about a picture means nothing, but every step that a
real vision model takes is taken, at a size the test chooses (a bigger encoder is a longer
encode, for Stop).

The ``qwen2vl_merger`` kind is Qwen2-VL's projector (``tools/mtmd/models/qwen2vl.cpp``): two
patch embeddings (a picture and its temporal twin), no position embeddings (the encoder
rotates by the patch's row and column), and a merger of 2 x 2 patches into one embedding.
Beside a text model whose positions are M-RoPE (``tests/support/model_files.copy_as_mrope``),
each picture then takes fewer positions than embeddings: max(columns, rows) of its grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np


@dataclass(frozen=True)
class ProjectorShape:
    """The sizes of a test projector.

    Attributes:
        text_width: the text model's embedding width (the projector's output).
        width: the encoder's hidden width.
        blocks: encoder blocks (LLaVA's graph runs all but the last).
        image_size: the side, in pixels, every image is resized to.
        patch_size: the side of a patch: an image is (image_size / patch_size)² tokens.
        heads: attention heads.
        seed: the random weights' seed.
        kind: ``mlp`` (LLaVA's) or ``qwen2vl_merger`` (Qwen2-VL's; ``image_size`` is then
            only the encoder's nominal size: a picture keeps its own, in whole 28-px cells).
    """

    text_width: int = 576
    width: int = 64
    blocks: int = 3
    image_size: int = 64
    patch_size: int = 16
    heads: int = 4
    seed: int = 1
    kind: str = "mlp"

    @property
    def tokens_per_image(self) -> int:
        """How many embeddings (text-model positions) one image becomes."""
        return (self.image_size // self.patch_size) ** 2


LARGE = ProjectorShape(width=256, blocks=13, image_size=448, patch_size=14, heads=8)
"""An encoder that takes a while on a CPU (1,024 patches through 12 blocks): for Stop."""


def write_projector(path: Path, shape: ProjectorShape = ProjectorShape()) -> Path:
    """Write a projector GGUF of ``shape`` at ``path``; returns ``path``."""
    rng = np.random.default_rng(shape.seed)
    width, ffn = shape.width, shape.width * 2 + 8  # ffn != width: clip.cpp's swap check
    n_patches = shape.tokens_per_image

    def weight(*dims: int, scale: float = 0.0) -> np.ndarray:
        fan_in = dims[-1] if len(dims) > 1 else 1
        spread = scale or 1.0 / np.sqrt(fan_in)
        return (rng.standard_normal(dims) * spread).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name("Floodgate test projector")
    writer.add_description("random weights, for tests: what the model says means nothing")
    writer.add_string("clip.projector_type", shape.kind)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.use_gelu", True)
    vision = "clip.vision"
    writer.add_uint32(f"{vision}.embedding_length", width)
    writer.add_uint32(f"{vision}.feed_forward_length", ffn)
    writer.add_uint32(f"{vision}.block_count", shape.blocks)
    writer.add_uint32(f"{vision}.projection_dim", shape.text_width)
    writer.add_uint32(f"{vision}.attention.head_count", shape.heads)
    writer.add_float32(f"{vision}.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32(f"{vision}.image_size", shape.image_size)
    writer.add_uint32(f"{vision}.patch_size", shape.patch_size)
    writer.add_array(f"{vision}.image_mean", [0.5, 0.5, 0.5])
    writer.add_array(f"{vision}.image_std", [0.5, 0.5, 0.5])

    # numpy's shapes are ggml's dimensions reversed: (out, in) is ne = [in, out].
    p = shape.patch_size
    writer.add_tensor("v.patch_embd.weight", weight(width, 3, p, p, scale=0.05))
    merger = shape.kind == "qwen2vl_merger"
    if merger:
        writer.add_tensor("v.patch_embd.weight.1", weight(width, 3, p, p, scale=0.05))
    else:
        writer.add_tensor("v.patch_embd.bias", np.zeros(width, np.float32))
        writer.add_tensor("v.position_embd.weight", weight(n_patches, width, scale=0.02))
    for i in range(shape.blocks):
        block = f"v.blk.{i}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{block}.{name}.weight", weight(width, width))
            writer.add_tensor(f"{block}.{name}.bias", np.zeros(width, np.float32))
        for norm in ("ln1", "ln2"):
            writer.add_tensor(f"{block}.{norm}.weight", np.ones(width, np.float32))
            writer.add_tensor(f"{block}.{norm}.bias", np.zeros(width, np.float32))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(ffn, width))
        writer.add_tensor(f"{block}.ffn_up.bias", np.zeros(ffn, np.float32))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(width, ffn))
        writer.add_tensor(f"{block}.ffn_down.bias", np.zeros(width, np.float32))
    # The MLP into the text model's width; small outputs, like a text embedding's scale.
    # Qwen2-VL's merger reads 2 x 2 patches as one row.
    into = width * 4 if merger else width
    writer.add_tensor("mm.0.weight", weight(shape.text_width, into))
    writer.add_tensor("mm.0.bias", np.zeros(shape.text_width, np.float32))
    writer.add_tensor("mm.2.weight", weight(shape.text_width, shape.text_width, scale=0.002))
    writer.add_tensor("mm.2.bias", np.zeros(shape.text_width, np.float32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
