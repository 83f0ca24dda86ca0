"""What a model needs in memory, from its GGUF header, and how much of it a GPU can hold.

Pure arithmetic over the header (no llama.cpp): the Hub panel's estimate before a download
and the choice of GPU layers before a load use the same figures.

How llama.cpp places a model with ``n_gpu_layers = n`` (``llama-model.cpp``): the output layer
counts as layer ``n_layer`` and goes to the GPU first (with ``n >= 1``); of the ``n_layer``
blocks, those from ``n_layer + 1 - n`` on follow, with their part of the KV cache; the token
embeddings always stay on the CPU. So "every layer" is ``n_layer + 1``, as llama.cpp's own
"offloaded 31/31 layers" says. A model with tied embeddings (no ``output.weight``) puts a
copy of the embeddings on the GPU as its output layer.

On the device, besides the weights and the KV cache, llama.cpp reserves a compute buffer for
the largest graph: a micro-batch of ``n_ubatch`` tokens attending to the whole context. Its
two largest tensors are the attention scores (``n_ctx x n_ubatch x n_head`` floats, without
flash attention) and, with the output layer there, the logits (``n_ubatch x n_vocab`` floats).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from app.engine.model_card import GGUFHeader

KV_BYTES = 2
"""Bytes per cached key or value element: llama.cpp's default cache type is f16."""

CONTEXT_FLOOR = 4096
"""A context the fit never shrinks below to offload more (llama.cpp's ``--fit`` default)."""

MARGIN_CAP = 1024**3
"""At most this much of the device is left free (llama.cpp's ``--fit`` margin per device)."""

MARGIN_SHARE = 8
"""…and at most an eighth of it, so a small GPU is not mostly margin."""


@dataclass(frozen=True)
class ModelShape:
    """What of a model's architecture sizes its KV cache.

    Attributes:
        layers: the number of blocks.
        kv_heads: key/value heads summed over the layers (some models vary them per layer).
        key_length: elements of a key per head.
        value_length: elements of a value per head.
        context_length: the context it was trained for (None when the header omits it).
    """

    layers: int
    kv_heads: int
    key_length: int
    value_length: int
    context_length: int | None

    def kv_cache_bytes(self, n_ctx: int, layers: int | None = None) -> int:
        """The KV cache's bytes at ``n_ctx`` tokens, f16 (of ``layers`` blocks: all)."""
        whole = n_ctx * self.kv_heads * (self.key_length + self.value_length) * KV_BYTES
        if layers is None or layers >= self.layers:
            return whole
        return whole * max(0, layers) // self.layers


def _int(metadata: dict[str, object], key: str) -> int | None:
    value = metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _per_layer(metadata: dict[str, object], key: str, layers: int) -> int | None:
    """A head count summed over the layers: one number for all, or a list of one per layer."""
    value = metadata.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value * layers
    if isinstance(value, list) and len(value) == layers and all(isinstance(v, int) for v in value):
        return sum(int(v) for v in value)
    return None


def _widest(metadata: dict[str, object], key: str) -> int:
    """A per-layer count at its largest: one number for all, or a list of one per layer."""
    value = metadata.get(key)
    if isinstance(value, list):
        return max((v for v in value if isinstance(v, int)), default=0)
    return _int(metadata, key) or 0


def model_shape(header: GGUFHeader) -> ModelShape | None:
    """The KV-cache shape in a header, or None when it lacks what is needed."""
    metadata = header.metadata
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        return None
    layers = _int(metadata, f"{arch}.block_count")
    if not layers or layers <= 0:
        return None
    heads = _per_layer(metadata, f"{arch}.attention.head_count", layers)
    kv_heads = _per_layer(metadata, f"{arch}.attention.head_count_kv", layers) or heads
    embedding = _int(metadata, f"{arch}.embedding_length")
    key_length = _int(metadata, f"{arch}.attention.key_length")
    if key_length is None and embedding and heads:
        key_length = embedding // (heads // layers) if heads >= layers else None
    value_length = _int(metadata, f"{arch}.attention.value_length") or key_length
    if not kv_heads or not key_length or not value_length:
        return None
    return ModelShape(
        layers=layers,
        kv_heads=kv_heads,
        key_length=key_length,
        value_length=value_length,
        context_length=_int(metadata, f"{arch}.context_length"),
    )


@dataclass(frozen=True)
class ModelSizes:
    """A model's weights by layer, and what sizes its KV cache and compute buffer.

    Attributes:
        shape: the KV cache's shape.
        block_bytes: the weights of each block, in order.
        output_bytes: the output layer's weights (its norm, and its matrix or the tied copy
            of the embeddings).
        heads: attention heads per layer (the widest layer's).
        vocab: the vocabulary's size.
        embedding: the embedding's width.
        feed_forward: the feed-forward width (the widest layer's).
    """

    shape: ModelShape
    block_bytes: tuple[int, ...]
    output_bytes: int
    heads: int
    vocab: int
    embedding: int
    feed_forward: int

    @property
    def all_layers(self) -> int:
        """``n_gpu_layers`` that offloads everything: the blocks and the output layer."""
        return len(self.block_bytes) + 1

    def weights_on_gpu(self, n_gpu_layers: int) -> int:
        """Bytes of weights on the device with ``n_gpu_layers`` (llama.cpp's placement)."""
        if n_gpu_layers <= 0:
            return 0
        blocks = self.blocks_on_gpu(n_gpu_layers)
        on_gpu = self.block_bytes[len(self.block_bytes) - blocks :] if blocks else ()
        return self.output_bytes + sum(on_gpu)

    def blocks_on_gpu(self, n_gpu_layers: int) -> int:
        """How many blocks (with their KV cache) are on the device: the output layer first."""
        return min(len(self.block_bytes), max(0, n_gpu_layers - 1))

    def compute_bytes(self, n_gpu_layers: int, n_ctx: int, n_ubatch: int) -> int:
        """The device's compute buffer for a micro-batch of ``n_ubatch`` over ``n_ctx``."""
        if n_gpu_layers <= 0:
            return 0
        tokens = min(n_ctx, n_ubatch)
        scores = n_ctx * tokens * self.heads * 4
        logits = tokens * self.vocab * 4  # the output layer is the first to go
        activations = tokens * (self.embedding * 8 + self.feed_forward * 12)
        return max(scores, logits) + activations

    def on_gpu(self, n_gpu_layers: int, n_ctx: int, n_ubatch: int) -> int:
        """Everything on the device: weights, their KV cache, the compute buffer."""
        return (
            self.weights_on_gpu(n_gpu_layers)
            + self.shape.kv_cache_bytes(n_ctx, self.blocks_on_gpu(n_gpu_layers))
            + self.compute_bytes(n_gpu_layers, n_ctx, n_ubatch)
        )


def model_sizes(header: GGUFHeader, file_size: int) -> ModelSizes | None:
    """The sizes in a header read with its tensors, or None when it lacks what is needed."""
    shape = model_shape(header)
    if shape is None or not header.tensors:
        return None
    metadata = header.metadata
    arch = str(metadata.get("general.architecture"))
    tensors = header.tensor_bytes(file_size)
    blocks = [0] * shape.layers
    output = 0
    for name, size in tensors.items():
        if name.startswith("blk."):
            index = name.split(".", 2)[1]
            if index.isdigit() and int(index) < shape.layers:
                blocks[int(index)] += size
        elif name.startswith("output"):
            output += size
    if "output.weight" not in tensors:
        output += tensors.get("token_embd.weight", 0)  # tied embeddings: a copy goes as output
    vocab = _int(metadata, f"{arch}.vocab_size")
    if vocab is None:
        tokens = metadata.get("tokenizer.ggml.tokens")
        vocab = getattr(tokens, "length", None) or (len(tokens) if isinstance(tokens, list) else 0)
    return ModelSizes(
        shape=shape,
        block_bytes=tuple(blocks),
        output_bytes=output,
        heads=_widest(metadata, f"{arch}.attention.head_count"),
        vocab=int(vocab or 0),
        embedding=_int(metadata, f"{arch}.embedding_length") or 0,
        feed_forward=_widest(metadata, f"{arch}.feed_forward_length"),
    )


MOST_PARALLEL = 4
"""The most replies side by side chosen without asking: past four, each stream's pace falls
well below one alone's on a CPU, and the person's own reply is one of them."""

PARALLEL_SHARE = 4
"""The sequences' KV caches together may take at most this fraction (1/4) of the memory
there is (RAM for a model on the CPU, the GPU's room beside the weights for one on a GPU)."""


def choose_parallel(kv_per_sequence: int, available: int, most: int = MOST_PARALLEL) -> int:
    """How many replies to decode side by side: as many caches as a share of memory holds.

    Args:
        kv_per_sequence: one sequence's KV cache at the context asked for, in bytes.
        available: the memory there is for them (free RAM, or the GPU's room).
        most: the most to choose.

    Returns:
        Between 1 and ``most``.
    """
    if kv_per_sequence <= 0:
        return 1
    return max(1, min(most, available // PARALLEL_SHARE // kv_per_sequence))


def margin(total: int) -> int:
    """What is left free on a device of ``total`` bytes: 1 GiB, or an eighth of a small one."""
    return min(MARGIN_CAP, total // MARGIN_SHARE)


class Why(enum.Enum):
    """Why the plan offloads what it does."""

    ALL = "all"
    """Everything fits."""
    CONTEXT = "context"
    """Everything fits at a smaller context."""
    PARTIAL = "partial"
    """Some layers do not fit; they stay on the CPU."""
    NONE_FIT = "none fit"
    """Not even one layer fits."""
    SET = "set"
    """The user's GPU layers setting."""


@dataclass(frozen=True)
class OffloadPlan:
    """How many layers go to the device, at what context, and what that should take.

    Attributes:
        n_gpu_layers: layers offloaded (0 to :attr:`ModelSizes.all_layers`).
        all_layers: the model's layers, the output layer counted.
        n_ctx: the context to open with (smaller than asked only with ``Why.CONTEXT``).
        need: bytes the plan should take on the device.
        budget: bytes the device could give (its free memory less the margin, or the cap).
        why: why this many.
    """

    n_gpu_layers: int
    all_layers: int
    n_ctx: int
    need: int
    budget: int
    why: Why


def plan_offload(
    sizes: ModelSizes,
    n_ctx: int,
    n_ubatch: int,
    budget: int,
    wanted: int | None = None,
) -> OffloadPlan:
    """The layers to offload so that weights, KV cache and compute buffer fit ``budget``.

    Every layer at the asked context if that fits; else every layer at a smaller context
    (halved, never below :data:`CONTEXT_FLOOR`), as llama.cpp's ``--fit`` does; else as many
    layers as fit at the asked context, the rest on the CPU.

    Args:
        sizes: the model's sizes.
        n_ctx: the context asked for.
        n_ubatch: the micro-batch the context will be made with.
        budget: bytes the device can give.
        wanted: the user's GPU layers setting (None: fit).
    """
    every = sizes.all_layers
    if wanted is not None:
        n = max(0, min(wanted, every))
        return OffloadPlan(n, every, n_ctx, sizes.on_gpu(n, n_ctx, n_ubatch), budget, Why.SET)
    need = sizes.on_gpu(every, n_ctx, n_ubatch)
    if need <= budget:
        return OffloadPlan(every, every, n_ctx, need, budget, Why.ALL)
    smaller = n_ctx // 2
    while smaller >= CONTEXT_FLOOR:
        need = sizes.on_gpu(every, smaller, n_ubatch)
        if need <= budget:
            return OffloadPlan(every, every, smaller, need, budget, Why.CONTEXT)
        smaller //= 2
    for n in range(every - 1, 0, -1):
        need = sizes.on_gpu(n, n_ctx, n_ubatch)
        if need <= budget:
            return OffloadPlan(n, every, n_ctx, need, budget, Why.PARTIAL)
    return OffloadPlan(0, every, n_ctx, 0, budget, Why.NONE_FIT)
