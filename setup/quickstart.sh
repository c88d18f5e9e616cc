#!/usr/bin/env bash
# Quick start: install the core into .venv, then convert, validate and time the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q -e .
.venv/bin/python tools/converter.py convert --config=examples/digits/digits.yml
.venv/bin/python tools/converter.py run --config=examples/digits/digits.yml --validate
.venv/bin/python tools/converter.py run --config=examples/digits/digits.yml --round=100
.venv/bin/python examples/digits/evaluate.py
