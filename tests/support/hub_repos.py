"""Repositories for the fake Hub (app/standins/fake_hub.py) that the download tests share."""

from __future__ import annotations

from app.standins.fake_hub import FakeFile, FakeRepo, gguf_bytes
from app.store.paths import DEFAULT_MODEL

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

TINY_SHAPE: dict[str, int | str | list[int]] = {
    "general.architecture": "llama",
    "general.name": "Tiny",
    "llama.block_count": 4,
    "llama.context_length": 2048,
    "llama.embedding_length": 256,
    "llama.attention.head_count": 8,
    "llama.attention.head_count_kv": 2,
}
"""A small model's header: 4 layers, 2 KV heads of 32 elements (256 / 8)."""


def tiny(size: int, name: str = "Tiny") -> bytes:
    """A synthetic GGUF file of ``size`` bytes with :data:`TINY_SHAPE`'s header."""
    return gguf_bytes({**TINY_SHAPE, "general.name": name}, size)


def smol_repo() -> FakeRepo:
    """The bundled model, served as the Hub serves it."""
    return FakeRepo(SMOL, {SMOL_FILE: FakeFile(source=DEFAULT_MODEL)}, downloads=5000, likes=40)


def tiny_repo(repo_id: str = "tester/Tiny-GGUF", **kwargs: object) -> FakeRepo:
    """A repository of synthetic quantizations, a split one among them."""
    files = {
        "Tiny-Q2_K.gguf": FakeFile(data=tiny(300_000)),
        "Tiny-Q4_K_M.gguf": FakeFile(data=tiny(500_000)),
        "Tiny-F16.gguf": FakeFile(data=tiny(1_500_000)),
        "Q8_0/Tiny-Q8_0-00001-of-00002.gguf": FakeFile(data=tiny(400_000)),
        # llama.cpp's split parts are GGUF files each (the later ones hold only tensors).
        "Q8_0/Tiny-Q8_0-00002-of-00002.gguf": FakeFile(data=gguf_bytes({}, 450_000)),
        "README.md": FakeFile(data=b"# Tiny\n"),
    }
    return FakeRepo(repo_id, files, **kwargs)  # type: ignore[arg-type]
