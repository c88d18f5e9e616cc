"""The checked-in mace_ir_pb2.py must describe exactly mace_ir.proto (regenerate: tools/gen_proto.py)."""
import ast
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from mace.proto import mace_ir_pb2

ROOT = Path(__file__).resolve().parent.parent


def _descriptor_in(generated: Path) -> descriptor_pb2.FileDescriptorProto:
    # protoc embeds the file descriptor as one bytes literal; a second import of the
    # module would clash in the descriptor pool, so read the literal instead.
    text = generated.read_text()
    start = text.index("AddSerializedFile(") + len("AddSerializedFile(")
    end = text.index(")\n", start)
    return descriptor_pb2.FileDescriptorProto.FromString(ast.literal_eval(text[start:end]))


def test_generated_module_matches_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the 'dev' extra) compiles the .proto")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_proto
    finally:
        sys.path.pop(0)
    expected = _descriptor_in(gen_proto.generate(tmp_path))
    actual = descriptor_pb2.FileDescriptorProto()
    mace_ir_pb2.DESCRIPTOR.CopyToProto(actual)
    assert actual == expected, "mace_ir_pb2.py is stale: run python tools/gen_proto.py"
