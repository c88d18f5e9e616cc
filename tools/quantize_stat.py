#!/usr/bin/env python3
"""Reduce a `run --quantize_stat` log to a quantize range file (MACE's quantize_stat.py).

    python tools/quantize_stat.py --log_file LOG [--percentile P] [--enhance [--enhance_ratio R]] > ranges.txt

Same as `python tools/converter.py quantize_stat`; see docs/quantization.md.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from a checkout

from mace.cli.quantize_stat_cmd import tool_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(tool_main())
