"""Writes binary ONNX models for the reliability tests, encoding the protobuf by hand (no
onnx package needed): usage raw_models.py NAME OUTPUT.

  shape-untyped   the 58-byte reproducer in binary form: Shape of the output of an op
                  without a schema (ONNX 1.12's data propagation dereferenced its null type)
  untyped-input   Shape of a graph input declared without a type
  short-raw-data  a 4x3 float initializer with 3 bytes of raw_data
"""
import sys


def varint(n):
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def field(number, value):
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def node(op, inputs, outputs):
    return (b"".join(field(1, i) for i in inputs) + b"".join(field(2, o) for o in outputs)
            + field(4, op))


def model(graph, opset=16):
    # ModelProto: ir_version = 1, graph = 7, opset_import = 8 (domain 1, version 2).
    return field(1, 8) + field(7, graph) + field(8, field(2, opset))


def float_tensor_type(dims):
    # TypeProto.tensor_type = 1: elem_type = 1 (FLOAT), shape = 2 of dims (dim_value = 1).
    shape = b"".join(field(1, field(1, d)) for d in dims)
    return field(1, field(1, 1) + field(2, shape))


MODELS = {
    "shape-untyped": model(field(1, node("r", [], ["g"])) + field(1, node("Shape", ["g"], ["S"]))
                           + field(2, "g")),
    # GraphProto.input = 11: a ValueInfoProto with a name (1) and no type (2).
    "untyped-input": model(field(1, node("Shape", ["x"], ["S"])) + field(2, "g")
                           + field(11, field(1, "x"))),
    # TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9; GraphProto.initializer = 5.
    "short-raw-data": model(field(1, node("MatMul", ["x", "W"], ["y"])) + field(2, "g")
                            + field(5, field(1, 4) + field(1, 3) + field(2, 1) + field(8, "W")
                                    + field(9, b"\0\0\0"))
                            + field(11, field(1, "x") + field(2, float_tensor_type([2, 4])))
                            + field(12, field(1, "y"))),
}

with open(sys.argv[2], "wb") as out:
    out.write(MODELS[sys.argv[1]])
