"""Regenerates the binary bad-input models of the importer's error tests.

Run with a Python that has the onnx package (Debian: /usr/bin/python3 with python3-onnx):
    python3 make_bad_models.py
Text-syntax cases live in the .test files themselves; these need the binary format
(the text syntax cannot spell negative dims) or must be bytes that are not ONNX.
"""
import random

import onnx
from onnx import TensorProto, helper


def linear_model(weight_dims, input_dims=(1, 4)):
    weight = TensorProto(name="fc.weight", data_type=TensorProto.FLOAT, dims=weight_dims)
    weight.data_location = TensorProto.EXTERNAL  # graph only, like the shared models
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "fc.weight"], ["y"], name="/fc/MatMul")],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(input_dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def save(model, name):
    with open(name, "wb") as f:
        f.write(model.SerializeToString())


save(linear_model([4, -3]), "negative-dim.onnx")
save(linear_model([4, 3], input_dims=(1, -4)), "negative-input-dim.onnx")
save(linear_model([4, 1 << 40, 1 << 30]), "overflowing-dim.onnx")
# A zero axis makes the true element count 0, but the cost model counts it as one.
save(linear_model([0, 1 << 40, 1 << 30]), "zero-axis-overflowing-dim.onnx")
random.seed(7)
with open("random-bytes.onnx", "wb") as f:
    f.write(bytes(random.getrandbits(8) for _ in range(4096)))
