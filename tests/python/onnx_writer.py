"""Small ONNX models written as protobuf bytes by hand (the wire format and onnx.proto's field numbers), so
that the Python tests need neither the onnx package nor files for their odd models."""

import struct


def _varint(value):
    value &= (1 << 64) - 1  # negative int64s as two's complement, as protobuf writes them
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field, wire_type):
    return _varint(field << 3 | wire_type)


def _int(field, value):
    return _key(field, 0) + _varint(value)


def _bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return _key(field, 2) + _varint(len(data)) + data


FLOAT = 1  # TensorProto.DataType
DOUBLE = 11
ATTR_FLOAT, ATTR_INT, ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType


def value_info(name, dims, elem_type=FLOAT):
    """ValueInfoProto: dims holds ints (sizes) and strs (symbolic names)."""
    shape = b"".join(
        _bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in dims)  # TensorShapeProto.dim
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))  # name, TypeProto{tensor_type}


def attribute(name, value):
    if isinstance(value, float):
        return _bytes(1, name) + _key(2, 5) + struct.pack("<f", value) + _int(20, ATTR_FLOAT)
    if isinstance(value, int):
        return _bytes(1, name) + _int(3, value) + _int(20, ATTR_INT)
    return _bytes(1, name) + b"".join(_int(8, v) for v in value) + _int(20, ATTR_INTS)


def node(op_type, inputs, outputs, name="", **attributes):
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    body += _bytes(3, name or f"{op_type}_0") + _bytes(4, op_type)
    body += b"".join(_bytes(5, attribute(k, v)) for k, v in attributes.items())
    return body


def initializer(name, dims, values):
    packed = struct.pack(f"<{len(values)}f", *values)
    return b"".join(_int(1, d) for d in dims) + _int(2, FLOAT) + _bytes(8, name) + _bytes(9, packed)


def model(nodes, inputs, outputs, initializers=(), opset=13, name="test_graph", metadata=None):
    """ModelProto bytes. inputs/outputs: (name, dims) or (name, dims, elem_type)."""
    graph = b"".join(_bytes(1, n) for n in nodes) + _bytes(2, name)
    graph += b"".join(_bytes(5, t) for t in initializers)
    graph += b"".join(_bytes(11, value_info(*i)) for i in inputs)
    graph += b"".join(_bytes(12, value_info(*o)) for o in outputs)
    body = _int(1, 8) + _bytes(2, "cnnrt-tests") + _bytes(7, graph)  # ir_version 8
    body += _bytes(8, _bytes(1, "") + _int(2, opset))  # opset_import
    for key, value in (metadata or {}).items():
        body += _bytes(14, _bytes(1, key) + _bytes(2, value))
    return body
