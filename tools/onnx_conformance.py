#!/usr/bin/env python3
"""Run onnx's operator test cases through the converter and write docs/onnx_conformance.md.

    python tools/onnx_conformance.py [--out docs/onnx_conformance.md] [--op Conv ...]
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from mace.frontends.onnx.registry import load_mappers  # noqa: E402
from mace.testing.onnx_conformance import collect_cases, markdown, run_case  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="docs/onnx_conformance.md")
    p.add_argument("--op", action="append", help="only cases of this op type (repeatable)")
    args = p.parse_args()
    supported = set(load_mappers())
    cases = [c for c in collect_cases() if not args.op or c.model.graph.node[0].op_type in args.op]
    results = [run_case(c) for c in cases]
    text = markdown(results, supported)
    pathlib.Path(args.out).write_text(text)
    for r in results:
        if r.outcome in ("fail", "error") and r.op_type in supported:
            print(f"{r.outcome}: {r.name}: {r.detail}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
