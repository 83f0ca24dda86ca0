"""Model files: only regular files are opened, nothing blocks, and GGUF headers are read robustly.

Crafted GGUF files are written with the ``gguf`` package's GGUFWriter; a loadable one is the
bundled model's tensors and metadata copied with a changed name or template (both by
tests/support/model_files.py).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine import ModelLoadError, model_file
from app.engine.model_card import (
    ModelCard,
    SkippedArray,
    read_chat_template,
    read_gguf_header,
    read_model_card,
)
from app.engine.model_file import check_model_file, readable_name
from tests.support.model_files import TEMPLATE, copy_model, write_gguf

QUICK_S = 3.0
"""Far below "for ever", far above a check on a loaded machine: a behaviour bound."""


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.gguf"
    os.mkfifo(path)
    return path


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock.gguf"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    try:
        yield path
    finally:
        server.close()


def refused(path: Path, check: object = check_model_file) -> str:
    started = time.perf_counter()
    with pytest.raises(ModelLoadError) as caught:
        check(path)  # type: ignore[operator]
    assert time.perf_counter() - started < QUICK_S
    return str(caught.value)


def test_a_named_pipe_is_refused_without_being_opened(fifo: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes: a hang if it were opened.
    assert refused(fifo) == (
        f"{fifo} is a named pipe, not a model file, so Floodgate does not open it. "
        "Choose a .gguf file."
    )
    assert "named pipe" in refused(fifo, read_model_card)
    assert "named pipe" in refused(fifo, read_chat_template)


def test_a_device_and_a_socket_are_refused(tmp_path: Path, unix_socket: Path) -> None:
    assert "/dev/null is a device, not a model file" in refused(Path("/dev/null"))
    link = tmp_path / "null.gguf"
    link.symlink_to("/dev/null")
    assert "is a device" in refused(link)
    assert "is a socket, not a model file" in refused(unix_socket)


def test_missing_folders_and_other_files_get_their_sentences(tmp_path: Path) -> None:
    assert refused(tmp_path / "nowhere.gguf").endswith("nowhere.gguf does not exist.")
    assert refused(tmp_path / "file.txt" / "below.gguf").endswith("does not exist.")
    assert "is a folder, not a model file" in refused(tmp_path)
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    assert "notes.gguf is not a GGUF model file" in refused(text)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    assert "empty.gguf is not a GGUF model file" in refused(empty)
    assert "cannot be read" in refused(Path("nul\0byte.gguf"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_says_why(tmp_path: Path) -> None:
    locked = write_gguf(tmp_path / "locked.gguf", {"general.name": "x"})
    locked.chmod(0)
    assert "cannot be read: Permission denied" in refused(locked)


def test_a_file_that_does_not_answer_gets_a_sentence_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hung network mount blocks stat() in the kernel; here the check itself blocks.
    release = threading.Event()
    monkeypatch.setattr(model_file, "_check", lambda path: release.wait(60))
    try:
        started = time.perf_counter()
        with pytest.raises(ModelLoadError) as caught:
            check_model_file(tmp_path / "remote.gguf", timeout=0.2)
        assert time.perf_counter() - started < QUICK_S
    finally:
        release.set()
    assert str(caught.value) == (
        f"The model file {tmp_path / 'remote.gguf'} did not answer within 0.2 seconds. It "
        "may be on a network drive or a disk that stopped responding."
    )


def test_the_waiting_thread_never_holds_the_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setattr(model_file, "_check", lambda path: release.wait(60))
    try:
        with pytest.raises(ModelLoadError):
            check_model_file(Path("/stuck.gguf"), timeout=0.05)
        stuck = [t for t in threading.enumerate() if t.name == "file check stuck.gguf"]
        assert stuck
        assert all(t.daemon for t in stuck)
    finally:
        release.set()


def test_invalid_utf8_in_a_string_is_shown_with_replacement_characters(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "bad-name.gguf",
        {
            "general.name": b"Caf\xc3 \xff\xfe model",
            "general.description": b"\xed\xa0\x80 a lone surrogate, encoded",
            "tokenizer.chat_template": TEMPLATE,
            "general.tags": [b"ok".decode(), "fine"],
            "llama.context_length": 2048,
        },
    )
    card = read_model_card(path)
    assert read_gguf_header(path).metadata["general.name"] == "Caf\ufffd \ufffd\ufffd model"
    assert card.name == "bad-name"  # shown by its file's name, not general.name
    assert card.has_chat_template
    assert card.context_length == 2048
    assert card.architecture == "llama"
    header = read_gguf_header(path)
    assert header.metadata["general.tags"] == ["ok", "fine"]
    description = header.metadata["general.description"]
    assert isinstance(description, str)
    assert description.encode("utf-8")
    assert read_chat_template(path) == TEMPLATE


def test_the_chat_template_is_found_whatever_else_is_invalid(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "bad-template.gguf",
        {
            b"general.\xffkey".decode("latin-1"): "a key written oddly",
            "general.name": b"\x80\x81",
            "tokenizer.chat_template": b"{{ messages[0].content }}\xff<|end|>",
            "tokenizer.ggml.tokens": [f"t{i}" for i in range(1000)],
        },
    )
    assert read_chat_template(path) == "{{ messages[0].content }}\ufffd<|end|>"
    tokens = read_gguf_header(path).metadata["tokenizer.ggml.tokens"]
    assert tokens == SkippedArray(1000, 8)
    no_template = write_gguf(tmp_path / "plain.gguf", {"general.name": "plain"})
    assert read_chat_template(no_template) is None
    assert not read_model_card(no_template).has_chat_template


def gguf_prefix(kv_count: int, version: int = 3, tensor_count: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensor_count, kv_count)


def gguf_string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (gguf_prefix(1) + gguf_string(b"general.name"), "ends in the middle of its header"),
        (gguf_prefix(1) + struct.pack("<Q", 2**62) + b"x" * 32, "ends in the middle"),
        (gguf_prefix(10**15), "ends in the middle of its header"),
        (gguf_prefix(1) + gguf_string(b"k") + struct.pack("<I", 99), "unknown type 99"),
        (
            gguf_prefix(1) + gguf_string(b"k") + struct.pack("<IIQ", 9, 8, 2**60),
            "ends in the middle",
        ),
        (
            gguf_prefix(1)
            + gguf_string(b"k")
            + struct.pack("<I", 9)
            + struct.pack("<IQ", 9, 1) * 20,
            "nested too deep",
        ),
        (b"GGUF" + struct.pack("<I", 77) + b"\0" * 32, "GGUF version 77 is unknown"),
        (gguf_prefix(0, tensor_count=10**12), "ends in the middle"),
        (
            gguf_prefix(0, tensor_count=1) + gguf_string(b"t") + struct.pack("<I", 1000),
            "a tensor has 1000 dimensions",
        ),
    ],
)
def test_a_damaged_header_gets_a_sentence(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "damaged.gguf"
    path.write_bytes(content)
    message = refused(path, read_model_card)
    assert message.startswith("The header of damaged.gguf cannot be read: ")
    assert reason in message


@pytest.fixture(scope="module")
def small_header(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("gguf") / "small.gguf"
    write_gguf(
        path,
        {
            "general.name": "small",
            "tokenizer.chat_template": TEMPLATE,
            "tokenizer.ggml.tokens": ["a", "b", "c"],
            "llama.context_length": 512,
        },
    )
    return path.read_bytes()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_damage_to_a_header_is_a_sentence_or_a_reading(
    data: st.DataObject, small_header: bytes, tmp_path: Path
) -> None:
    content = bytearray(small_header)
    for _ in range(data.draw(st.integers(1, 6))):
        index = data.draw(st.integers(4, len(content) - 1))
        content[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(8, len(content)))
    path = tmp_path / "fuzzed.gguf"
    path.write_bytes(bytes(content[:cut]))
    outcome: ModelCard | ModelLoadError
    try:
        outcome = read_model_card(path)
    except ModelLoadError as error:
        outcome = error
    if isinstance(outcome, ModelLoadError):
        assert "fuzzed.gguf" in str(outcome)
    else:
        assert outcome.name.encode("utf-8")  # every string is storable and showable


@pytest.mark.model
def test_a_loadable_model_with_an_invalid_name_keeps_its_template(
    tmp_path: Path, model_path: Path
) -> None:
    import llama_cpp

    copy = copy_model(model_path, tmp_path / "odd-name.gguf", {"general.name": b"Smol\xff\xfeLM"})
    original = read_chat_template(model_path)
    assert original is not None
    assert read_chat_template(copy) == original
    card = read_model_card(copy)
    assert read_gguf_header(copy).metadata["general.name"] == "Smol\ufffd\ufffdLM"
    assert card.name == readable_name(copy)
    assert card.parameters == read_model_card(model_path).parameters
    # llama-cpp-python's own reader gives up on the whole metadata here: the reason the
    # engine hands it the template read above.
    llm = llama_cpp.Llama(str(copy), n_ctx=256, n_threads=1, verbose=False)
    try:
        assert "tokenizer.chat_template" not in llm.metadata
    finally:
        llm.close()


@pytest.mark.model
def test_the_vocabulary_is_fingerprinted_by_its_tokens_not_its_name(
    model_path: Path, tmp_path: Path
) -> None:
    from gguf import GGUFReader

    own = read_model_card(model_path).vocabulary
    assert len(own) == 32
    renamed = copy_model(model_path, tmp_path / "Renamed.gguf", {"general.name": "Another"})
    assert read_model_card(renamed).vocabulary == own
    tokens = [str(t) for t in GGUFReader(model_path).fields["tokenizer.ggml.tokens"].contents()]
    tokens[300], tokens[301] = tokens[301], tokens[300]
    swapped = copy_model(model_path, tmp_path / "Swapped.gguf", {"tokenizer.ggml.tokens": tokens})
    assert read_model_card(swapped).vocabulary not in ("", own)
    assert (
        read_model_card(write_gguf(tmp_path / "bare.gguf", {"general.name": "x"})).vocabulary == ""
    )


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
        ("Llama-3.2-1B-Instruct-IQ4_XS.gguf", "Llama-3.2-1B-Instruct"),
        ("mistral-7b-instruct-v0.2.Q5_K_M.gguf", "mistral-7b-instruct-v0.2"),
        ("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf", "qwen2.5-7b-instruct"),
        ("Meta-Llama-3-8B-Instruct.fp16.gguf", "Meta-Llama-3-8B-Instruct"),
        ("SmolLM2-360M-Instruct-BF16.gguf", "SmolLM2-360M-Instruct"),
        ("Phi-3-mini-4k-instruct-gguf.gguf", "Phi-3-mini-4k-instruct"),
        ("gemma-3-4b-it-qat-q4_0.gguf", "gemma-3-4b-it-qat"),
        ("Q4_0.gguf", "Q4_0"),  # nothing left without the tag: the file's name as it is
        ("tiny.gguf", "tiny"),
    ],
)
def test_a_model_is_named_after_its_file_without_what_files_add(file: str, name: str) -> None:
    assert readable_name(Path(file)) == name
