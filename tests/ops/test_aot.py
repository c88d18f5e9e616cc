"""Kernels compiled ahead of time (`converter.py warmup --aot`, MACE_AOT=1): a run without numba.

numba is most of a small model's memory (mace/ops/fast/_aot.py). The library built ahead must
serve a model's loops with the same machine code numba's do (outputs byte-equal), without
importing numba in the running process, fall back to numba for what it lacks, and say when it is
missing, damaged or incomplete. The argument keys it dispatches on must be numba's types.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from mace.ops.fast import _aot, kernel_cache
from mace.ops.fast.binding import direct
from tests.cli_helpers import ROOT, cli, save_onnx, small_model_entry, write_deployment

numba = pytest.importorskip("numba", reason="numba is not installed: nothing can be compiled ahead")
aot_build = pytest.importorskip("mace.ops.fast.aot_build")
_HEADERS = Path(sysconfig.get_paths()["include"]) / "Python.h"
needs_a_compiler = pytest.mark.skipif(
    not _HEADERS.is_file() or not (shutil.which("cc") or shutil.which("gcc")),
    reason=f"building a library needs a C compiler and Python's headers ({_HEADERS}; Debian: python3-dev, "
           f"which setup/test.sh installs)")


def _values():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ro = a.copy()
    ro.flags.writeable = False
    raw = np.zeros(4 * 6 + 1, np.uint8)[1:].view(np.float32)   # not 4-byte aligned
    return [a, a[:, 1], a[..., ::2], np.asfortranarray(a), ro, ro[0], np.float32(2.5), np.zeros(()),
            np.arange(5), np.zeros((2, 2), np.uint8), np.zeros(3, bool), raw, np.zeros((0, 4), np.float32),
            1, -7, 2 ** 62, True, False, 2.5, np.int64(3), np.int32(3), np.float64(1), np.bool_(True),
            None, (1, 2, 3), (1, 2.0), (a, 1), ()]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_an_arguments_key_is_the_key_of_the_type_numba_gives_it(value):
    assert _aot.value_key(value) == aot_build.type_key(numba.typeof(value))


def test_literal_and_omitted_arguments_get_no_key():
    from numba.core import types
    assert aot_build.type_key(types.literal(3)) is None
    assert aot_build.type_key(types.Omitted(1)) is None
    assert aot_build.type_key(types.Tuple((types.int64, types.literal(2)))) is None


def test_the_stamp_covers_the_loops_and_what_they_import():
    files = {p.relative_to(_aot.FAST).as_posix() for p in _aot._compiled_files()}
    loops = {p.relative_to(_aot.FAST).as_posix() for p in
             list(_aot.FAST.glob("_*loops.py")) + list((_aot.FAST / "int8").glob("_*loops.py"))}
    assert loops <= files and {"_tile_ir.py", "_isa.py", "aot_build.py", "_aot.py"} <= files
    assert "compute.py" not in files   # the kernels' Python side: editing it keeps the library


def test_an_edited_loop_or_a_helper_it_imports_names_another_library(tmp_path, monkeypatch):
    import shutil as sh
    fast = tmp_path / "fast"
    sh.copytree(_aot.FAST, fast, ignore=sh.ignore_patterns("__pycache__"))
    monkeypatch.setattr(_aot, "FAST", fast)
    stamps = []
    for edit in (None, "_loops.py", "_tile_ir.py", "compute.py"):
        if edit:
            with open(fast / edit, "a") as f:
                f.write("\n# edited\n")
        _aot.stamp.cache_clear()
        stamps.append(_aot.stamp())
    _aot.stamp.cache_clear()
    # a loop module and a module it imports change the machine code; the kernels' Python side does not
    assert stamps[0] != stamps[1] != stamps[2] and stamps[3] == stamps[2]


def test_serial_twins_of_the_pool_drivers():
    found = kernel_cache.dispatchers()
    rows = [r for r in kernel_cache.recorded() if r[0] == "mace.ops.fast._act_loops:unary_par"]
    twins = aot_build.serial_twins(rows, found)
    assert twins and all(name == "mace.ops.fast._act_loops:unary" for name, _ in twins)
    sig = kernel_cache.parse_signature(twins[0][1])
    assert len(sig) == len(kernel_cache.parse_signature(rows[0][1])) + 1
    assert aot_build.serial_twins(rows + twins, found) == []   # listed already: not repeated


def _probe(x, n, s, flag, pair, ro, d, out):
    """Writes what it received: every kind of argument a trampoline loads."""
    out[0] = x[1, 2]
    out[1] = n
    out[2] = s
    out[3] = 1.0 if flag else 0.0
    out[4] = pair[0] * 10 + pair[1]
    out[5] = ro[2]
    out[6] = d
    out[7] = x.strides[0]


def test_a_trampoline_loads_what_pack_lays_out_and_the_runner_calls_it_by_address():
    kernel = numba.njit(_probe)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1][:, ::1]   # rows reversed: negative stride
    ro = np.array([5.0, 6.0, 7.0], np.float32)
    ro.flags.writeable = False
    outs = [np.zeros(8), np.zeros(8)]
    steps = [(x, 7, np.float32(2.5), True, (3, 4), ro, -1.25, outs[0]),
             (np.ascontiguousarray(x), -2, np.float32(0.5), False, (0, 9), ro, 8.0, outs[1])]
    loops = kernel_cache.jitted("mace.ops.fast._chain_loops")
    rows, ints, floats, keep = [], [], [], []
    for args in steps:
        keys = _aot.args_key(args)
        assert all(_aot.chainable(k) for k in keys)
        cres = aot_build._trampoline(kernel, keys)
        rows.append((cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name), len(ints), len(floats)))
        _aot.pack(args, keys, ints, floats, keep)
    ints = np.array(ints + [0], np.int64)
    loops.run_table(np.array(rows, np.int64), ints, np.array(floats, np.float64))
    assert outs[0].tolist() == [6.0, 7, 2.5, 1, 34, 7, -1.25, -16]
    assert outs[1].tolist() == [6.0, -2, 0.5, 0, 9, 7, 8.0, 16]
    assert ints[-1] == 1   # the last step's position


def test_an_ahead_chain_names_the_node_of_the_step_it_reached():
    made = _aot.AotChain(print, np.zeros((2, 3), np.int64), np.array([0, 1], np.int64), np.zeros(1))
    made.indices = [4, 9]
    assert made.at == 9


class _FakeExt:
    @staticmethod
    def k0(x, out):
        out[:] = x + 1


def _module(fallback):
    key = _aot.args_key((np.zeros(3, np.float32), np.zeros(3, np.float32)))
    entry = {"kernels": {"inc": [(key, "k0", "")]}, "addresses": {}, "constants": {"NR": 16}}
    return _aot.AotModule("mace.ops.fast._fake", _FakeExt, entry, fallback)


def test_a_module_served_ahead_picks_by_type_and_falls_back_for_the_rest():
    calls = []

    class Numba:
        @staticmethod
        def inc(x, out):
            calls.append(x.dtype)
            out[:] = x + 2
    m = _module(lambda: Numba)
    x, out = np.ones(3, np.float32), np.zeros(3, np.float32)
    m.inc(x, out)
    assert out.tolist() == [2, 2, 2] and calls == [] and m.NR == 16
    xd, outd = np.ones(3), np.zeros(3)
    m.inc(xd, outd)   # float64: no such export
    assert outd.tolist() == [3, 3, 3] and calls == [np.float64]
    assert m.fallbacks and m.fallbacks[0][0] == "inc"
    # a bound step resolves its export once (binding.direct), and keeps a step it cannot
    assert direct(partial(m.inc, x, out)).func is _FakeExt.k0
    step = partial(m.inc, xd, outd)
    assert direct(step) is step


def test_a_kernel_the_library_lacks_without_numba_names_itself_and_the_fix():
    m = _module(lambda: None)
    with pytest.raises(RuntimeError, match=r"_fake\.other: not in the library.*warmup --aot"):
        m.other


def test_a_damaged_library_is_said_and_not_used(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MACE_AOT_DIR", str(tmp_path))
    so, manifest = _aot.paths()
    so.write_bytes(b"not an ELF file")
    manifest.write_text("{}")
    _aot.library.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="mace.jit"):
            assert _aot.library() is None
        assert "cannot be loaded" in caplog.text and _aot.AOT_HINT in caplog.text
        so.unlink()
        _aot.library.cache_clear()
        caplog.clear()
        with caplog.at_level("WARNING", logger="mace.jit"):
            assert _aot.library() is None
        assert "no ahead-of-time kernel library" in caplog.text and _aot.AOT_HINT in caplog.text
    finally:
        _aot.library.cache_clear()


# ---- end to end: a model's signatures, the library, a run without numba ---------------------------

def _activation_model(path: Path) -> str:
    """Conv + Sigmoid (fused into the packed GEMM's store step: store_rows by address), a
    depthwise conv + HardSigmoid, an Add, a pooled Gemm and a Softmax."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(3)
    init = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, s).astype(np.float32), n) for n, s in
            (("w1", (16, 3, 3, 3)), ("b1", (16,)), ("w2", (16, 1, 3, 3)), ("b2", (16,)), ("fc", (16, 10)),
             ("fb", (10,)))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c1"], ["s1"]),
             helper.make_node("Conv", ["s1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=16),
             helper.make_node("HardSigmoid", ["c2"], ["h2"]),
             helper.make_node("Add", ["s1", "h2"], ["a"]),
             helper.make_node("GlobalAveragePool", ["a"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"]),
             helper.make_node("Softmax", ["y"], ["prob"])]
    return save_onnx(path, nodes, [("x", [1, 3, 24, 24])], [("prob", [1, 10])], init)


def _converted(tmp_path: Path) -> Path:
    """tmp_path/work with the activation model converted by the CLI (deploy.yml)."""
    work = tmp_path / "work"
    work.mkdir()
    checksum = _activation_model(work / "act.onnx")
    write_deployment(work / "deploy.yml", {"act": small_model_entry(
        work / "act.onnx", checksum, "x", "1,3,24,24", "prob", input_ranges="0,1")}, library="act")
    assert cli("convert", "--config=deploy.yml", cwd=work, timeout=300).returncode == 0
    return work


CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from pathlib import Path
    from mace.ir.model_io import load_model
    from mace.ops.fast import _aot
    from mace.runtime.engine import Engine
    pb, out, threads = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    x = np.random.default_rng(0).random((1, 3, 24, 24), np.float32)
    engine = Engine(load_model(pb, pb.with_suffix(".data")), options={"num_threads": threads})
    for _ in range(20):   # past the first run's tightening and the chain's threshold
        y = engine.run({"x": x})["prob"]
    lib = _aot.library() if _aot.enabled() else None
    served = sorted(k for m in (lib.modules.values() if lib else ()) for k in vars(m) if not k.startswith("_"))
    np.save(out, y)
    print(json.dumps({"numba": "numba" in sys.modules, "served": served,
                      "fallbacks": [f for m in (lib.modules.values() if lib else ()) for f in m.fallbacks],
                      "program": [type(c).__name__ for c in engine._program]}))
""")


def _run(pb: Path, out: Path, env: dict, threads: int = 1) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(pb), str(out), str(threads)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@needs_a_compiler
def test_a_model_runs_from_the_library_without_numba_and_byte_equal(tmp_path):
    work = _converted(tmp_path)
    pb = next((work / "builds").rglob("*.pb"))
    env = dict(os.environ, MACE_AOT_DIR=str(tmp_path / "lib"))
    env.pop("MACE_NO_JIT", None)

    # the signatures this model calls without the pool (as a run served ahead does), recorded
    used = tmp_path / "used.json"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_kernel_signatures.py"), "--child", str(pb),
                        str(used)], env=dict(env, MACE_NO_POOL="1", OMP_NUM_THREADS="1"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    used = json.loads(used.read_text())
    assert len(used) >= 4 and "mace.ops.fast._loops:depthwise" in used, sorted(used)
    # a list without the depthwise loop: a user's model calling a signature the list lacks
    listed = tmp_path / "act.txt"
    kernel_cache.write_recorded({k: v for k, v in used.items() if not k.endswith(":depthwise")}, listed)

    hint = _aot.AOT_HINT.split()[2:]   # python tools/converter.py <warmup --aot>
    built = cli(*hint, "--signatures", listed, cwd=work, env=env, timeout=900)
    assert built.returncode == 0, built.stderr
    assert "kernel signatures compiled ahead of time into" in built.stdout, built.stdout
    assert len(list((tmp_path / "lib").glob("mace_kernels_*"))) == 2   # the module and its manifest

    # the run gets that loop from numba, says so and notes its signature; the hint compiles it in
    run = cli("run", "--config=deploy.yml", "--omp_num_threads", "1", cwd=work, env=dict(env, MACE_AOT="1"))
    assert run.returncode == 0, run.stderr
    assert "except 1 loop(s) it does not hold" in run.stderr and "_loops.depthwise" in run.stderr, run.stderr
    assert f"`{_aot.AOT_HINT}` compiles them in" in run.stderr, run.stderr
    built = cli(*hint, "--signatures", listed, cwd=work, env=env, timeout=900)
    assert built.returncode == 0, built.stderr

    numba_run = _run(pb, tmp_path / "numba.npy", env)
    ahead = _run(pb, tmp_path / "ahead.npy", dict(env, MACE_AOT="1"))
    assert ahead["numba"] is False and ahead["fallbacks"] == [], ahead
    assert "store_rows" in ahead["served"], ahead   # the fused Sigmoid's store step, by address
    # a small model's steps chained without numba: the library's runner over trampolines
    assert "AotChain" in ahead["program"] and "Chain" in numba_run["program"], (ahead, numba_run)
    assert numba_run["numba"] is True
    np.testing.assert_array_equal(np.load(tmp_path / "ahead.npy"), np.load(tmp_path / "numba.npy"))

    # two threads: the pool is numba's, the loops it splits come from numba, the rest as before
    two = _run(pb, tmp_path / "two.npy", dict(env, MACE_AOT="1", MACE_SPLIT_SMALL_RUNS="1"), threads=2)
    assert two["numba"] is True
    np.testing.assert_allclose(np.load(tmp_path / "two.npy"), np.load(tmp_path / "numba.npy"), rtol=1e-6)

    # the command warmup prints, as a user runs it (their deployment file for the placeholder):
    # it says what served the kernels
    words = built.stdout.split("`")[1].replace("<your deployment.yml>", "deploy.yml").split()
    assert words[:4] == ["MACE_AOT=1", "python", "tools/converter.py", "run"], built.stdout
    run = cli(*words[3:], cwd=work, env=dict(env, MACE_AOT="1"))
    assert run.returncode == 0, run.stderr
    assert "CPU kernels served ahead of time" in run.stderr and "numba was not loaded" in run.stderr, run.stderr
    # two threads: the compute pool is numba's, and the note says so
    run = cli("run", "--config=deploy.yml", "--omp_num_threads", "2", cwd=work,
              env=dict(env, MACE_AOT="1", MACE_SPLIT_SMALL_RUNS="1"))
    assert run.returncode == 0, run.stderr
    assert "numba was loaded all the same, for the compute pool's threads" in run.stderr, run.stderr
    assert "does not hold" not in run.stderr, run.stderr   # its parallel loops are numba's by design


def test_no_library_is_said_with_the_command_that_builds_it(tmp_path):
    work = _converted(tmp_path)
    env = dict(os.environ, MACE_AOT="1", MACE_AOT_DIR=str(tmp_path / "empty"))
    env.pop("MACE_NO_JIT", None)
    run = cli("run", "--config=deploy.yml", cwd=work, env=env)
    assert run.returncode == 0, run.stderr
    assert "no ahead-of-time kernel library" in run.stderr and _aot.AOT_HINT in run.stderr, run.stderr


def test_warmup_aot_refuses_a_list_it_can_compile_none_of(tmp_path):
    rows = [r for r in kernel_cache.recorded() if r[0].endswith(":launch")]   # parallel only
    listed = tmp_path / "par.txt"
    kernel_cache.write_recorded({rows[0][0]: {rows[0][1]}}, listed)
    env = dict(os.environ, MACE_AOT_DIR=str(tmp_path / "lib"))
    r = cli("warmup", "--aot", "--signatures", listed, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 1 and "none of the 1 signatures can be compiled ahead" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not list((tmp_path / "lib").glob("mace_kernels_*"))


def test_warmup_aot_without_a_c_compiler_says_what_it_needs_and_leaves_nothing(tmp_path):
    listed = tmp_path / "one.txt"
    name, sig = next(r for r in kernel_cache.recorded() if r[0].endswith("_loops:binary_clip"))
    kernel_cache.write_recorded({name: {sig}}, listed)
    env = dict(os.environ, MACE_AOT_DIR=str(tmp_path / "lib"), CC=str(tmp_path / "no-such-cc"))
    r = cli("warmup", "--aot", "--signatures", listed, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 1 and "the library could not be built" in r.stderr, r.stderr
    assert "needs a C compiler" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "lib").exists() or not any((tmp_path / "lib").iterdir())
