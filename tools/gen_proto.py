#!/usr/bin/env python3
"""Regenerate mace/proto/mace_ir_pb2.py from mace/proto/mace_ir.proto, and
mace/frontends/caffe/caffe_pb2.py from third_party/caffe/caffe.proto.

Needs grpcio-tools (the `dev` extra). tests/project/test_proto_drift.py fails when
the checked-in module no longer matches the .proto (tests/caffe/test_caffe_proto.py
for the Caffe schema).
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def generate(out_dir: pathlib.Path) -> pathlib.Path:
    from grpc_tools import protoc

    proto_dir = ROOT / "mace" / "proto"
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}",
                      str(proto_dir / "mace_ir.proto")])
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")
    return out_dir / "mace_ir_pb2.py"


def generate_caffe(out_dir: pathlib.Path) -> pathlib.Path:
    """Compile our Caffe schema (third_party/caffe/caffe.proto) into out_dir/caffe_pb2.py."""
    from grpc_tools import protoc

    proto_dir = ROOT / "third_party" / "caffe"
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}",
                      str(proto_dir / "caffe.proto")])
    if rc != 0:
        raise SystemExit(f"protoc failed on caffe.proto with exit code {rc}")
    return out_dir / "caffe_pb2.py"


if __name__ == "__main__":
    path = generate(ROOT / "mace" / "proto")
    print(f"wrote {path}")
    path = generate_caffe(ROOT / "mace" / "frontends" / "caffe")
    print(f"wrote {path}")
    sys.exit(0)
