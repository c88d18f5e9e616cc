#!/usr/bin/env python3
"""The second pass of setup/test.sh: the example builds and a sample of numeric tests again, on the
same machine, with the libraries that choose their instructions at run time made to choose others.

Why: numpy, OpenBLAS, numba, TensorFlow's oneDNN and onnxruntime pick their kernels for the CPU they
find (AVX-512 here, AVX2 there), so a float result can differ in its last bits between machines. A
test or an example that holds only on the CI machine's instruction set (a checksum of float output,
an exact comparison with a framework) then fails on a user's machine (issue 40: an AMD EPYC). Run
under a second feature set, such a test fails here first.

    NPY_DISABLE_CPU_FEATURES   numpy's dispatched AVX-512 kernels off (AVX2's where there is no
                               AVX-512), read from numpy at run time: only features this CPU has
                               and numpy dispatches (a baseline one makes numpy refuse to start)
    OPENBLAS_CORETYPE          OpenBLAS's Haswell kernels (Sandybridge's without AVX-512)
    NUMBA_CPU_NAME/_FEATURES   our compiled loops built for Haswell (AVX2 + FMA; Sandybridge: AVX):
                               numba keeps the host's feature list unless both are set, and
                               mace/ops/fast/_isa.py reads the same setting to pick 256-bit tiles
    TF_ENABLE_ONEDNN_OPTS=1    TensorFlow's oneDNN kernels on (off by default here: the examples and
    ONEDNN_MAX_CPU_ISA         the validation reference set 0 unless told), capped at AVX2 (AVX)

onnxruntime (MLAS) and LiteRT (XNNPACK) have no such switch; their comparisons are covered by
tolerances instead. Usage: python setup/second_cpu_pass.py [pytest args]; `--print` only prints the
settings. The exit status is pytest's.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The example builds: models whose bytes depend on the CPU, their checksums pinned where they are made.
EXAMPLES = [
    "tests/tflite/test_tflite_docs.py",          # TFLite float + int8: build, convert, validate with LiteRT
    "tests/project/test_tf_docs.py",             # TensorFlow MobileNet v2: build, convert, validate
    "tests/project/test_digits_example.py",      # digits: numpy (BLAS) training, convert, validate
    "tests/caffe/test_caffe_example.py",         # the Caffe files byte for byte (our writer), validate
]
# A sample of numeric tests: comparisons with TensorFlow and onnxruntime, and our compiled loops
# (built for the second target: their 256-bit tiles, no VNNI) against the numpy reference.
INT8, FAST = "tests/quantize/test_int8_fast.py::", "tests/ops/test_fast_kernels.py::"
NUMERIC = [
    "tests/config/test_pin_checksum.py",
    # onnxruntime's float-then-rounded values and its integer kernels, within a step
    "tests/quantize/test_qat.py::test_the_range_of_a_folded_relu_lands_on_the_fused_conv",
    "tests/quantize/test_qat.py::test_lone_quantize_and_dequantize_compute_what_onnx_does",
    "tests/quantize/test_qoperator.py::test_microsoft_qlinear_ops_match_onnxruntime",
    "tests/quantize/test_qoperator.py::test_integer_outputs_and_dequantized_outputs",
    "tests/tensorflow/test_tf_math_ops.py",      # TensorFlow ops with oneDNN on
    "tests/ops/test_packed_gemm.py",             # the float GEMM's tiles, every ragged edge
    FAST + "test_fully_connected_matches_reference",
    FAST + "test_depthwise_matches_reference",
    FAST + "test_winograd_matches_reference",
    FAST + "test_fake_quantize_matches_reference_bit_for_bit",
    INT8 + "test_digits_quantized_gives_identical_bytes_on_the_fast_and_the_reference_path",
    INT8 + "test_grouped_1x1_convs_run_as_column_runs",
    INT8 + "test_depthwise_fast_equals_reference",
    INT8 + "test_fully_connected_fast_equals_reference",
    INT8 + "test_quantize_and_dequantize_edges_round_like_the_reference",
    "tests/ops/test_fast_matmul_integer.py",     # the integer GEMM's int32 store, portable tiles
    # the library built ahead of time for that CPU (its name and features, as numba's JIT): a run
    # without numba, byte-equal to numba's
    "tests/ops/test_aot.py::test_a_model_runs_from_the_library_without_numba_and_byte_equal",
]
# The whole pass (the loops' compilation for the second target included): 205 s of CPU time, so
# about 2 min on 2 idle cores; 5.7 min measured on a shared 2-core VM at a load average of 5-6.

AVX512 = "avx512"
AVX2 = "avx2"


def numpy_features() -> tuple:
    """(features this CPU has, features numpy dispatches at run time), numpy's names."""
    try:
        from numpy._core import _multiarray_umath as umath   # numpy >= 2
    except ImportError:
        from numpy.core import _multiarray_umath as umath    # numpy 1.x

    return ({name for name, found in umath.__cpu_features__.items() if found},
            list(umath.__cpu_dispatch__))


def tier(present: set) -> str | None:
    """The widest x86 vector tier this CPU has: the one the second pass turns off."""
    if "AVX512F" in present:
        return AVX512
    if "AVX2" in present:
        return AVX2
    return None


def npy_disabled(present: set, dispatch: list, top: str | None) -> list:
    """numpy's dispatched features of the top tier that this CPU has (never a baseline one: numpy
    refuses to import when told to disable what it was built to assume)."""
    if top == AVX512:
        wanted = [f for f in dispatch if f.startswith("AVX512") or f == "X86_V4"]
    elif top == AVX2:
        wanted = [f for f in dispatch if f in ("AVX2", "FMA3", "X86_V3") or f.startswith("AVX512")
                  or f == "X86_V4"]
    else:
        wanted = []
    return [f for f in wanted if f in present]


def second_environment(present: set, dispatch: list, machine: str) -> tuple:
    """({variable: value}, [why, one line each]) for the second pass on a CPU with `present`."""
    env, why = {"TF_ENABLE_ONEDNN_OPTS": "1"}, ["TensorFlow with oneDNN's kernels (the first pass: Eigen's)"]
    x86 = machine.lower() in ("x86_64", "amd64", "i686", "x86")
    top = tier(present) if x86 else None
    if top is None:
        env["NUMBA_CPU_NAME"] = "generic"
        why.append("our compiled loops for a generic CPU (no vector extensions beyond the baseline)")
        return env, why
    wide, narrow = ("AVX-512", "AVX2") if top == AVX512 else ("AVX2", "AVX")
    disabled = npy_disabled(present, dispatch, top)
    if disabled:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(disabled)
        why.append(f"numpy without its {wide} kernels ({', '.join(disabled)})")
    if top == AVX512:
        env.update(OPENBLAS_CORETYPE="Haswell", NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES="+avx2,+fma",
                   ONEDNN_MAX_CPU_ISA="AVX2")
    else:
        env.update(OPENBLAS_CORETYPE="Sandybridge", NUMBA_CPU_NAME="sandybridge", NUMBA_CPU_FEATURES="+avx",
                   ONEDNN_MAX_CPU_ISA="AVX")
    why += [f"OpenBLAS's {env['OPENBLAS_CORETYPE']} kernels ({narrow})",
            f"our compiled loops built for {env['NUMBA_CPU_NAME']} ({env['NUMBA_CPU_FEATURES']})",
            f"oneDNN capped at {env['ONEDNN_MAX_CPU_ISA']}"]
    return env, why


def main(argv: list) -> int:
    present, dispatch = numpy_features()
    env, why = second_environment(present, dispatch, platform.machine())
    print("second pass: the example builds and a sample of numeric tests again under another CPU feature "
          "set, so a result that holds only on this machine's instruction set fails here:")
    for line in why:
        print(f"  - {line}")
    print("  " + " ".join(f"{k}={v!r}" if " " in v else f"{k}={v}" for k, v in env.items()))
    if "--print" in argv:
        return 0
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", *EXAMPLES, *NUMERIC, *argv]
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, **env})
    print(f"second pass: exit status {done.returncode} in {time.monotonic() - start:.0f} s")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
