"""The hand-written ONNX writer (hybrid_memory/_embedding/onnx_writer.py) checked by the ``onnx``
package itself (a dev dependency only; the library never imports it): what it writes
parses as a ModelProto and passes ``onnx.checker``, with the inputs, outputs, opset and
external data the session relies on."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from hybrid_memory._embedding.model_files import find_model_files, read_safetensors
from hybrid_memory._embedding.onnx_writer import HIDDEN, LAYERS, _Graph, _value_info, write_onnx

onnx = pytest.importorskip("onnx", reason="onnx is in the dev extra: pip install -e '.[dev]'")

FLOAT, INT64 = 1, 7


def test_a_tiny_graph_parses_checks_and_runs() -> None:
    """The wire format on its own: one Add of an input and an initializer."""
    import onnxruntime as ort

    g = _Graph()
    bias = g.constant("bias", np.array([1.0, -2.0, 0.5], dtype=np.float32))
    g.op("Add", "x", bias, out="y")
    buffer = io.BytesIO()
    g.write(
        buffer,
        [_value_info("x", FLOAT, ["batch", 3])],
        [_value_info("y", FLOAT, ["batch", 3])],
    )
    model = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(model, full_check=True)
    assert (model.ir_version, model.producer_name) == (8, "hybrid-memory")
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    assert [n.op_type for n in model.graph.node] == ["Add"]
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    x = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    (y,) = session.run(["y"], {"x": x})
    assert y.tolist() == [[2.0, 0.0, 3.5]]


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return read_safetensors(find_model_files(download=False).weights)


def _check_minilm(model: object) -> None:
    graph = model.graph  # type: ignore[attr-defined]
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in graph.output] == ["last_hidden_state"]
    dims = graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", "tokens", HIDDEN]
    ops = [n.op_type for n in graph.node]
    assert ops.count("LayerNormalization") == 2 * LAYERS + 1
    assert ops.count("Softmax") == LAYERS


def test_the_minilm_graph_with_external_data_passes_the_checker(
    weights: dict[str, np.ndarray], tmp_path: Path
) -> None:
    model_path = tmp_path / "model.onnx"
    with model_path.open("wb") as out, (tmp_path / "weights.bin").open("wb") as data:
        write_onnx(weights, out, data, "weights.bin")
    onnx.checker.check_model(str(model_path), full_check=True)
    model = onnx.load(str(model_path), load_external_data=False)
    _check_minilm(model)
    external = [t for t in model.graph.initializer if t.data_location == 1]
    assert external, "the large tensors go to the data file"
    for tensor in external:
        entries = {e.key: e.value for e in tensor.external_data}
        assert entries["location"] == "weights.bin"
        assert int(entries["offset"]) % 65536 == 0  # mappable on every platform
    # The data file holds what the safetensors file held: the word embeddings, exactly.
    loaded = onnx.load(str(model_path))
    table = next(t for t in loaded.graph.initializer if t.name == "word_embeddings")
    expected = weights["embeddings.word_embeddings.weight"]
    assert np.array_equal(onnx.numpy_helper.to_array(table), expected)


def test_the_minilm_graph_inline_passes_the_checker(weights: dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    write_onnx(weights, buffer)
    model = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(model, full_check=True)
    _check_minilm(model)
    assert all(t.data_location == 0 for t in model.graph.initializer)
