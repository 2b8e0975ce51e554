"""A minimal ONNX writer, pure (bytes out, no onnx package): the protobuf wire format
for the fields ``onnx.proto`` numbers, and the BERT encoder of all-MiniLM-L6-v2 as a
graph of standard operators (opset 17) with the weights as initializers.

Why by hand: ``onnx``'s helpers would replace ~120 lines of wire format, but it is a
large dependency and builds the whole model in memory, where this writes
it piece by piece, the weights copied once, the large ones to a separate data file that
onnxruntime maps. ``tests/unit/test_onnx_writer.py`` checks the output with
``onnx.checker`` (``onnx`` is a dev dependency only).
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

LAYERS, HIDDEN, HEADS, INTERMEDIATE, LAYER_NORM_EPS = 6, 384, 12, 1536, 1e-12


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes | str) -> bytes:
    raw = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


_FLOAT, _INT64 = 1, 7  # TensorProto.DataType


class _Tensor:
    """A TensorProto whose data is written straight from the array (no copy): inline
    (raw_data), or at an aligned offset of a separate data file (external data, which
    onnxruntime can map instead of parsing)."""

    def __init__(self, name: str, array: npt.NDArray[Any]) -> None:
        self.array = np.ascontiguousarray(array)
        kind = {np.dtype(np.float32): _FLOAT, np.dtype(np.int64): _INT64}[self.array.dtype]
        self.head = b"".join(_int_field(1, d) for d in self.array.shape)
        self.head += _int_field(2, kind) + _field(8, name)

    def field(self, data: BinaryIO | None, data_name: str) -> tuple[bytes, memoryview]:
        """The tensor as GraphProto.initializer (field 5): header bytes, then inline data."""
        raw = self.array.data.cast("B")
        if data is None or self.array.nbytes < _EXTERNAL_MIN:
            body = self.head + _varint(9 << 3 | 2) + _varint(len(raw))
            return _varint(5 << 3 | 2) + _varint(len(body) + len(raw)) + body, raw
        offset = data.tell()
        padding = -offset % _ALIGNMENT
        data.write(b"\0" * padding)
        data.write(raw)
        entries = (
            ("location", data_name),
            ("offset", str(offset + padding)),
            ("length", str(len(raw))),
        )
        body = self.head + b"".join(_field(13, _field(1, k) + _field(2, v)) for k, v in entries)
        body += _int_field(14, 1)  # data_location: EXTERNAL
        return _varint(5 << 3 | 2) + _varint(len(body)) + body, memoryview(b"")


_EXTERNAL_MIN = 4096  # bytes: smaller tensors stay inline
_ALIGNMENT = 65536  # offsets in the data file, so it can be mapped on every platform


def _attribute(name: str, value: int | float | list[int]) -> bytes:
    if isinstance(value, list):  # INTS
        return _field(1, name) + b"".join(_int_field(8, v) for v in value) + _int_field(20, 7)
    if isinstance(value, float):  # FLOAT
        return _field(1, name) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int_field(20, 1)
    return _field(1, name) + _int_field(3, value) + _int_field(20, 2)  # INT


def _value_info(name: str, elem_type: int, dims: list[str | int]) -> bytes:
    shape = b"".join(
        _field(1, _field(2, d) if isinstance(d, str) else _int_field(1, d)) for d in dims
    )
    tensor_type = _int_field(1, elem_type) + _field(2, shape)
    return _field(1, name) + _field(2, _field(1, tensor_type))


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.initializers: list[_Tensor] = []
        self._count = 0

    def constant(self, name: str, array: npt.NDArray[Any]) -> str:
        self.initializers.append(_Tensor(name, array))
        return name

    def op(
        self, op_type: str, *inputs: str, out: str = "", **attributes: int | float | list[int]
    ) -> str:
        self._count += 1
        output = out or f"{op_type.lower()}_{self._count}"
        node = b"".join(_field(1, name) for name in inputs)
        node += _field(2, output) + _field(3, output) + _field(4, op_type)
        node += b"".join(_field(5, _attribute(k, v)) for k, v in attributes.items())
        self.nodes.append(node)
        return output

    def write(
        self,
        out: BinaryIO,
        inputs: list[bytes],
        outputs: list[bytes],
        data: BinaryIO | None = None,
        data_name: str = "",
    ) -> None:
        """The ModelProto, written to ``out`` piece by piece (the weights copied once);
        with ``data``, the large tensors go to that file, named ``data_name`` beside it."""
        parts: list[bytes | memoryview] = [b"".join(_field(1, n) for n in self.nodes)]
        parts.append(_field(2, "minilm"))
        for tensor in self.initializers:
            parts.extend(tensor.field(data, data_name))
        parts.append(b"".join(_field(11, v) for v in inputs))
        parts.append(b"".join(_field(12, v) for v in outputs))
        graph_size = sum(len(part) for part in parts)
        out.write(_int_field(1, 8) + _field(2, "hybrid-memory"))  # ir_version 8, producer
        out.write(_varint(7 << 3 | 2) + _varint(graph_size))  # graph
        for part in parts:
            out.write(part)
        out.write(_field(8, _field(1, "") + _int_field(2, 17)))  # opset_import: ai.onnx 17


def write_onnx(
    weights: dict[str, npt.NDArray[Any]],
    out: BinaryIO,
    data: BinaryIO | None = None,
    data_name: str = "",
) -> None:
    """The BERT encoder of all-MiniLM-L6-v2 as a serialised ONNX model, written to ``out``.

    Inputs ``input_ids`` and ``attention_mask`` (int64, batch x tokens); output
    ``last_hidden_state`` (float32, batch x tokens x 384). Token types are all 0, so
    their embedding row is folded into the position embeddings.
    """
    g = _Graph()
    w = {name: np.asarray(value) for name, value in weights.items()}

    def linear(x: str, prefix: str) -> str:
        kernel = g.constant(f"{prefix}.weight_t", w[f"{prefix}.weight"].T)
        return g.op(
            "Add", g.op("MatMul", x, kernel), g.constant(f"{prefix}.bias", w[f"{prefix}.bias"])
        )

    def layer_norm(x: str, prefix: str, out: str = "") -> str:
        scale = g.constant(f"{prefix}.weight", w[f"{prefix}.weight"])
        bias = g.constant(f"{prefix}.bias", w[f"{prefix}.bias"])
        return g.op("LayerNormalization", x, scale, bias, out=out, axis=-1, epsilon=LAYER_NORM_EPS)

    head = HIDDEN // HEADS
    split = g.constant("split_heads", np.array([0, 0, HEADS, head], dtype=np.int64))
    merge = g.constant("merge_heads", np.array([0, 0, HIDDEN], dtype=np.int64))

    # Embeddings: word + (position + token type 0), then LayerNorm.
    table = g.constant("word_embeddings", w["embeddings.word_embeddings.weight"])
    words = g.op("Gather", table, "input_ids")
    positions_table = (
        w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    )
    first, second = (
        g.constant(n, np.array([v], dtype=np.int64)) for n, v in (("i0", 0), ("i1", 1))
    )
    two = g.constant("i2", np.array([2], dtype=np.int64))
    length = g.op("Slice", g.op("Shape", "input_ids"), second, two)  # [tokens]
    positions = g.op("Slice", g.constant("position_embeddings", positions_table), first, length)
    x = layer_norm(g.op("Add", words, positions), "embeddings.LayerNorm")

    # Attention bias: 0 where the mask is 1, a large negative number where it is 0.
    mask = g.op("Cast", "attention_mask", to=_FLOAT)
    penalty = g.constant("mask_penalty", np.array(np.finfo(np.float32).min, dtype=np.float32))
    bias = g.op("Mul", g.op("Sub", g.constant("one_f", np.array(1.0, np.float32)), mask), penalty)
    bias = g.op("Unsqueeze", bias, g.constant("mask_axes", np.array([1, 2], dtype=np.int64)))
    scale = g.constant("attention_scale", np.array(1.0 / np.sqrt(head), dtype=np.float32))

    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        q = g.op(
            "Transpose",
            g.op("Reshape", linear(x, f"{p}.attention.self.query"), split),
            perm=[0, 2, 1, 3],
        )
        k = g.op(
            "Transpose",
            g.op("Reshape", linear(x, f"{p}.attention.self.key"), split),
            perm=[0, 2, 3, 1],
        )
        v = g.op(
            "Transpose",
            g.op("Reshape", linear(x, f"{p}.attention.self.value"), split),
            perm=[0, 2, 1, 3],
        )
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
        attended = linear(context, f"{p}.attention.output.dense")
        x = layer_norm(g.op("Add", attended, x), f"{p}.attention.output.LayerNorm")
        hidden = linear(x, f"{p}.intermediate.dense")
        # GELU, exact: 0.5 * h * (1 + erf(h / sqrt(2))).
        erf = g.op(
            "Erf", g.op("Div", hidden, g.constant(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32)))
        )
        gelu = g.op(
            "Mul",
            g.op("Mul", hidden, g.constant(f"{p}.half", np.array(0.5, np.float32))),
            g.op("Add", erf, g.constant(f"{p}.one", np.array(1.0, np.float32))),
        )
        last = "last_hidden_state" if i == LAYERS - 1 else ""
        x = layer_norm(
            g.op("Add", linear(gelu, f"{p}.output.dense"), x), f"{p}.output.LayerNorm", last
        )

    inputs = [
        _value_info("input_ids", _INT64, ["batch", "tokens"]),
        _value_info("attention_mask", _INT64, ["batch", "tokens"]),
    ]
    outputs = [_value_info("last_hidden_state", _FLOAT, ["batch", "tokens", HIDDEN])]
    g.write(out, inputs, outputs, data, data_name)
