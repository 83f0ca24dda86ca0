"""Crafted GGUF model files, written with the ``gguf`` package's GGUFWriter.

A header-only one has the values a test gives it and no tensors; a loadable one is the bundled
model's tensors and metadata copied with a changed name or template.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()
    return target
