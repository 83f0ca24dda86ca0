"""Crafted GGUF model files, written with the ``gguf`` package's GGUFWriter.

A header-only one has the values a test gives it and no tensors; a loadable one is the bundled
model's tensors and metadata copied with a changed name or template.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"
"""A short chat template, for a header to carry."""


def write_gguf(path: Path, values: Mapping[str, str | bytes | int | list[str]]) -> Path:
    """A GGUF file with ``values`` in its header and no tensors (bytes: written as they are)."""
    from gguf import GGUFValueType, GGUFWriter

    writer = GGUFWriter(path, "llama")
    for key, value in values.items():
        if isinstance(value, (str, bytes)):
            writer.add_key_value(key, value, GGUFValueType.STRING)
        elif isinstance(value, list):
            writer.add_key_value(key, value, GGUFValueType.ARRAY, sub_type=GGUFValueType.STRING)
        else:
            writer.add_uint32(key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path


def copy_model(source: Path, target: Path, changes: Mapping[str, str | bytes | list[str]]) -> Path:
    """``source``'s tensors and metadata in ``target``, with ``changes`` to string values.

    A list replaces an array of strings (the vocabulary's tokens, say).
    """
    from gguf import GGUFReader, GGUFValueType, GGUFWriter, Keys

    reader = GGUFReader(source)
    architecture = str(reader.fields[Keys.General.ARCHITECTURE].contents())
    writer = GGUFWriter(target, architecture, endianess=reader.endianess)
    remaining = dict(changes)
    for field in reader.fields.values():
        if field.name == Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == GGUFValueType.ARRAY else None
        value = remaining.pop(field.name, None)
        if value is None:
            writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
        elif isinstance(value, list):
            writer.add_key_value(
                field.name, value, GGUFValueType.ARRAY, sub_type=GGUFValueType.STRING
            )
        else:
            writer.add_key_value(field.name, value, GGUFValueType.STRING)
    for key, value in remaining.items():
        writer.add_key_value(key, value, GGUFValueType.STRING)
    _write_tensors(writer, reader, [tensor.data for tensor in reader.tensors])
    return target


def _write_tensors(writer: Any, reader: Any, data: Sequence[Any]) -> None:
    """Write ``reader``'s tensors with ``data`` (their contents, in order) after the keys."""
    for tensor in reader.tensors:
        writer.add_tensor_info(
            tensor.name,
            tensor.data.shape,
            tensor.data.dtype,
            tensor.data.nbytes,
            tensor.tensor_type,
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for rows in data:
        writer.write_tensor_data(rows, tensor_endianess=reader.endianess)
    writer.close()


def copy_as_mrope(source: Path, target: Path) -> Path:
    """The bundled (Llama-architecture) model as a Qwen2-VL text model: M-RoPE positions.

    The same weights under the ``qwen2vl`` architecture, whose rope is M-RoPE (each position
    is four: time, row, column, unused; a text token's four are equal). Its query and key
    rows are put back in the order of Hugging Face's checkpoint (the converter permutes them
    for Llama's interleaved rope; Qwen's rotates halves), so it speaks as the model does:
    the greedy replies of the two run alike for their first words, then part over the last
    bits of a different rope kernel.
    """
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter, Keys

    reader = GGUFReader(source)
    writer = GGUFWriter(target, "qwen2vl", endianess=reader.endianess)
    heads: dict[str, int] = {}
    for field in reader.fields.values():
        if field.name == Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        name = field.name.replace("llama.", "qwen2vl.", 1)
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), value_type, sub_type=sub_type)
        if name.startswith("qwen2vl.attention.head_count"):
            heads[name.rsplit(".", 1)[-1]] = int(field.contents())
    # Sections of the rotated half of a 64-wide head: time, row, column, unused (Qwen2-VL's
    # 16/24/24 of 128, halved).
    writer.add_array("qwen2vl.rope.dimension_sections", [8, 12, 12, 0])

    def unpermute(rows: np.ndarray, n_head: int) -> np.ndarray:
        # Rows are whole (a quantized row's blocks run along it), so rows move as bytes.
        shape = rows.shape
        return rows.reshape(n_head, shape[0] // n_head // 2, 2, *shape[1:]).swapaxes(1, 2)

    data = []
    for tensor in reader.tensors:
        rows = np.asarray(tensor.data)
        if tensor.name.endswith("attn_q.weight"):
            rows = unpermute(rows, heads["head_count"]).reshape(rows.shape)
        elif tensor.name.endswith("attn_k.weight"):
            rows = unpermute(rows, heads["head_count_kv"]).reshape(rows.shape)
        data.append(np.ascontiguousarray(rows))
    _write_tensors(writer, reader, data)
    return target
