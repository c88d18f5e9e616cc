#!/usr/bin/env python3
"""Run onnx's backend test suite (its own runner) over pymace and write docs/onnx_conformance.md.

    python tools/onnx_conformance.py [--out docs/onnx_conformance.md] [--pattern REGEX]

The suite: onnx's node, simple and PyTorch-converted/operator cases on the CPU
engine, graded by `onnx.backend.test.BackendTest` (mace/testing/onnx_backend_suite.py).
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from rich.progress import Progress  # noqa: E402

from mace.testing.onnx_backend_suite import markdown, run_suite  # noqa: E402
from mace.testing.onnx_conformance import case_op, collect_cases  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="docs/onnx_conformance.md")
    p.add_argument("--pattern", help="only test names matching this regex (e.g. 'test_conv')")
    args = p.parse_args()
    with Progress() as progress:
        task = progress.add_task("onnx backend cases", total=None)
        rows = run_suite(args.pattern, on_case=lambda: progress.advance(task))
    op_of = {c.name: case_op(c) for c in collect_cases()}
    pathlib.Path(args.out).write_text(markdown(rows, op_of))
    for suite, name, outcome, detail in rows:
        if outcome in ("fail", "error"):
            print(f"{outcome}: {suite} {name}: {detail}")
    bad = sum(r[2] in ("fail", "error") for r in rows)
    print(f"{len(rows)} cases, {sum(r[2] == 'pass' for r in rows)} passed, {bad} failed or errors; "
          f"wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
