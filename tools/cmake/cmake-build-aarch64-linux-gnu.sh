#!/bin/sh
# MACE's tools/cmake/cmake-build-aarch64-linux-gnu.sh: not needed here; this says what replaces it (docs/mace_compat.md, MACE's scripts).
root=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from mace.cli.mace_scripts import refuse; sys.exit(refuse(sys.argv[2]))' "$root" "tools/cmake/cmake-build-aarch64-linux-gnu.sh"
