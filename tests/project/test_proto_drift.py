"""The checked-in mace_ir_pb2.py must describe exactly mace_ir.proto (regenerate: tools/gen_proto.py)."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from mace.proto import mace_ir_pb2

ROOT = Path(__file__).resolve().parents[2]


def _descriptor_in(generated: Path) -> descriptor_pb2.FileDescriptorProto:
    # protoc embeds the file descriptor as one bytes literal; a second import of the
    # module would clash in the descriptor pool, so read the literal instead.
    text = generated.read_text()
    start = text.index("AddSerializedFile(") + len("AddSerializedFile(")
    end = text.index(")\n", start)
    return descriptor_pb2.FileDescriptorProto.FromString(ast.literal_eval(text[start:end]))


def generate_in_child(function: str, out_dir: Path) -> Path:
    """Run tools/gen_proto.py's `function` in a fresh interpreter: protoc (grpc_tools) crashes
    a process that has already loaded TensorFlow, as a test worker may have."""
    code = ("import pathlib, sys; sys.path.insert(0, sys.argv[1]); import gen_proto; "
            "print(getattr(gen_proto, sys.argv[2])(pathlib.Path(sys.argv[3])))")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "tools"), function, str(out_dir)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip().splitlines()[-1])


def test_generated_module_matches_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the 'dev' extra) compiles the .proto")
    expected = _descriptor_in(generate_in_child("generate", tmp_path))
    actual = descriptor_pb2.FileDescriptorProto()
    mace_ir_pb2.DESCRIPTOR.CopyToProto(actual)
    assert actual == expected, "mace_ir_pb2.py is stale: run python tools/gen_proto.py"
