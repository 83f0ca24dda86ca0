"""How much of a model a GPU can hold, from its real GGUF header; prompt chunks sized by time."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.backend import EngineOptions
from app.engine.fit import (
    CONTEXT_FLOOR,
    MOST_PARALLEL,
    ModelSizes,
    Why,
    choose_parallel,
    margin,
    model_shape,
    model_sizes,
    plan_offload,
)
from app.engine.model_card import read_gguf_header
from app.engine.placement import resolve_parallel
from app.engine.sequence import ChunkSizer

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def sizes(model_path: Path) -> ModelSizes:
    found = model_sizes(read_gguf_header(model_path), model_path.stat().st_size)
    assert found is not None
    return found


def test_the_layers_weights_add_up_to_the_file(sizes: ModelSizes, model_path: Path) -> None:
    header = read_gguf_header(model_path)
    tensors = header.tensor_bytes(model_path.stat().st_size)
    assert len(tensors) == header.tensor_count == 272
    assert len(sizes.block_bytes) == 30
    assert all(b == sizes.block_bytes[0] for b in sizes.block_bytes)  # alike blocks
    embeddings = tensors["token_embd.weight"]
    # SmolLM2 ties its output to its embeddings: the output layer is a copy of them.
    assert "output.weight" not in tensors
    assert sizes.output_bytes == embeddings + tensors["output_norm.weight"]
    assert sum(sizes.block_bytes) + sizes.output_bytes == sum(tensors.values())
    # Every tensor's bytes, from the data's start to the end of the file.
    assert model_path.stat().st_size - sum(tensors.values()) < 2 * MIB  # the header


def test_the_kv_cache_is_llama_cpps_own_figure(sizes: ModelSizes, model_path: Path) -> None:
    shape = model_shape(read_gguf_header(model_path, with_tensors=False))
    assert shape == sizes.shape
    # llama.cpp says "KV self size = 45.00 MiB" for this model at 2,048 tokens.
    assert sizes.shape.kv_cache_bytes(2048) == 45 * MIB
    assert sizes.shape.kv_cache_bytes(2048, layers=15) == 45 * MIB // 2


def test_layers_are_placed_as_llama_cpp_places_them(sizes: ModelSizes) -> None:
    every = sizes.all_layers
    assert every == 31  # 30 blocks and the output layer
    assert sizes.weights_on_gpu(0) == 0
    # The output layer first, then the blocks from the last one down.
    assert sizes.weights_on_gpu(1) == sizes.output_bytes
    assert sizes.blocks_on_gpu(1) == 0
    assert sizes.weights_on_gpu(2) == sizes.output_bytes + sizes.block_bytes[-1]
    assert sizes.weights_on_gpu(31) == sum(sizes.block_bytes) + sizes.output_bytes
    assert sizes.blocks_on_gpu(31) == sizes.blocks_on_gpu(99) == 30
    assert sizes.compute_bytes(0, 4096, 512) == 0
    # With the output layer there, the logits of a micro-batch are the largest tensor.
    assert sizes.compute_bytes(1, 1024, 512) >= 512 * 49152 * 4
    previous = 0
    for n in range(every + 1):
        need = sizes.on_gpu(n, 4096, 512)
        assert need >= previous
        previous = need


def test_every_layer_when_the_gpu_has_room(sizes: ModelSizes) -> None:
    plan = plan_offload(sizes, 4096, 512, budget=8 * 1024 * MIB)
    assert (plan.n_gpu_layers, plan.n_ctx, plan.why) == (31, 4096, Why.ALL)
    assert plan.need == sizes.on_gpu(31, 4096, 512) <= plan.budget


def test_fewer_layers_when_it_has_little(sizes: ModelSizes) -> None:
    budget = sizes.on_gpu(20, 4096, 512) + 1
    plan = plan_offload(sizes, 4096, 512, budget=budget)
    assert plan.why is Why.PARTIAL
    assert plan.n_gpu_layers == 20
    assert plan.need <= budget < sizes.on_gpu(21, 4096, 512)
    assert plan.n_ctx == 4096  # at or under the floor, the context is never shrunk


def test_none_when_not_one_layer_fits(sizes: ModelSizes) -> None:
    plan = plan_offload(sizes, 4096, 512, budget=1 * MIB)
    assert (plan.n_gpu_layers, plan.why, plan.need) == (0, Why.NONE_FIT, 0)


def test_a_smaller_context_before_fewer_layers_above_the_floor(sizes: ModelSizes) -> None:
    # Everything fits at 8,192 tokens but not at 32,768: the context is halved to fit.
    budget = sizes.on_gpu(31, 8192, 512) + 1
    plan = plan_offload(sizes, 32768, 512, budget=budget)
    assert (plan.n_gpu_layers, plan.n_ctx, plan.why) == (31, 8192, Why.CONTEXT)
    # Not below the floor: there, layers go to the CPU instead, at the context asked for.
    tight = sizes.on_gpu(31, CONTEXT_FLOOR, 512) - 1
    plan = plan_offload(sizes, 2 * CONTEXT_FLOOR, 512, budget=tight)
    assert plan.why is Why.PARTIAL
    assert 0 < plan.n_gpu_layers < 31
    assert plan.n_ctx == 2 * CONTEXT_FLOOR


def test_the_users_layers_win(sizes: ModelSizes) -> None:
    plan = plan_offload(sizes, 4096, 512, budget=1, wanted=12)
    assert (plan.n_gpu_layers, plan.why) == (12, Why.SET)
    assert plan_offload(sizes, 4096, 512, budget=1, wanted=999).n_gpu_layers == 31


def test_the_margin_is_a_gib_or_an_eighth_of_a_small_gpu() -> None:
    assert margin(80 * 1024 * MIB) == 1024 * MIB
    assert margin(4 * 1024 * MIB) == 512 * MIB


def _sized(time_of: object, seconds: float, chunks: int = 12) -> list[tuple[int, float]]:
    """Chunks a sizer asks for when each takes ``time_of(tokens)`` seconds."""
    return _asked(ChunkSizer(seconds, n_batch=512), time_of, chunks)


def _asked(sizer: ChunkSizer, time_of: object, chunks: int) -> list[tuple[int, float]]:
    taken = []
    for _ in range(chunks):
        n = sizer.size
        elapsed = time_of(n)  # type: ignore[operator]
        taken.append((n, elapsed))
        sizer.record(n, elapsed)
    return taken


def test_chunks_on_a_cpu_follow_the_rate() -> None:
    taken = _sized(lambda n: n / 160, seconds=0.4)  # 160 tokens/s, nothing fixed
    assert taken[0][0] == 16
    assert [n for n, _ in taken[:4]] == [16, 32, 64, 64]
    assert all(abs(t - 0.4) < 0.01 for _, t in taken[3:])


def test_chunks_on_a_gpu_grow_to_the_budget_and_never_past_twice_a_call() -> None:
    # A GPU: 10 ms a call whatever its size (launches, the weights read once), 0.2 ms a token.
    taken = _sized(lambda n: 0.010 + 0.0002 * n, seconds=0.02)
    assert all(t <= 0.0201 for _, t in taken)
    # Towards (20 - 10) ms / 0.2 ms = 50 tokens, from below (sized by the last chunk's rate).
    assert 45 <= taken[-1][0] <= 50
    # lavapipe: about 5 s a call, 0.08 s a token: a chunk takes at most 1.5 times the quickest
    # call, not chunks of a few tokens that each cost the fixed part.
    slow = _sized(lambda n: 5.0 + 0.08 * n, seconds=0.02)
    quickest = 5.0 + 0.08 * 16
    assert all(t <= 1.5 * quickest + 1e-9 for _, t in slow)
    assert slow[-1][0] >= 30


def _beside(time_of: object, step: float, chunks: int = 12) -> list[tuple[int, float]]:
    """Chunks sized as :mod:`app.engine.batch` sizes them beside replies that take ``step``."""
    sizer = ChunkSizer(0.75 * step, n_batch=512, smallest=2, first=2)
    sizer.ceiling = step
    return _asked(sizer, time_of, chunks)


def test_chunks_beside_decoding_replies_take_a_share_of_their_step_at_most_a_step() -> None:
    # This CPU: 4 ms a call, 2.7 ms a token; the others' step 17 ms. Budget 12.75 ms: 3 tokens.
    cpu = _beside(lambda n: 0.004 + 0.0027 * n, step=0.017)
    assert cpu[0][0] == 2
    assert all(n in (2, 3, 4) for n, _ in cpu)
    assert all(t <= 0.017 for _, t in cpu[1:])
    # A GPU whose fixed part exceeds the share (8 ms a call, step 10 ms): the chunk grows to
    # what a step allows beyond it, never past the step, not stuck at 2 tokens.
    gpu = _beside(lambda n: 0.008 + 0.00002 * n, step=0.010)
    assert all(t <= 0.010 + 1e-9 for _, t in gpu)
    assert gpu[-1][0] >= 60
    # A call dearer than a whole step: the smallest chunk, at its cost.
    slow = _beside(lambda n: 0.030 + 0.001 * n, step=0.010)
    assert all(n == 2 for n, _ in slow[1:])


def test_parallel_replies_are_chosen_from_the_caches_and_the_memory() -> None:
    mib = 1024 * 1024
    # A quarter of the memory for the caches: 4 GiB free and 256 MiB each holds four.
    assert choose_parallel(256 * mib, 4096 * mib) == 4
    assert choose_parallel(256 * mib, 2048 * mib) == 2
    assert choose_parallel(256 * mib, 1024 * mib) == 1
    # Never none, never more than the most.
    assert choose_parallel(256 * mib, 100 * mib) == 1
    assert choose_parallel(1 * mib, 64 * 1024 * mib) == MOST_PARALLEL
    assert choose_parallel(0, 1024 * mib) == 1


def test_auto_parallel_opens_a_sequence_per_place_each_with_the_context_asked(
    model_path: Path,
) -> None:
    whole = resolve_parallel(model_path, EngineOptions(n_ctx=2048, parallel=0, compute="cpu"))
    assert 1 <= whole.parallel <= MOST_PARALLEL
    assert whole.n_ctx == 2048 * whole.parallel
    assert resolve_parallel(model_path, EngineOptions(n_ctx=2048, parallel=3)).n_ctx == 6144
