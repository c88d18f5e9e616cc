"""Compiling the CPU kernels: announced while it happens, and done once per machine by `warmup`.

A model's first run compiles the loops it is the first to call (numba, 1-4 s each): the CLI says
so on one line when the first compile starts and how many it compiled at the end; `warmup`
compiles the signatures real models call (mace/ops/fast/kernel_signatures.txt), after which a
first run compiles nothing. The shipped list must parse, fit the kernels as they are now, and
hold every signature the digits example calls.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mace.ops.fast import kernel_cache
from tests.cli_helpers import ROOT, cli, workdir

pytest.importorskip("numba", reason="numba is not installed: the kernels are numpy code and nothing compiles")
NOTE = "note: " + kernel_cache.FIRST_NOTE
DONE = "CPU kernel(s) for this machine in"


def test_every_listed_signature_parses_back_to_itself():
    rows = kernel_cache.recorded()
    assert len(rows) > 20, "the shipped signature list is (nearly) empty"
    for name, text in rows:
        assert repr(kernel_cache.parse_signature(text)) == text, name


def test_no_listed_signature_is_stale():
    """Changed a loop's arguments? Run tools/gen_kernel_signatures.py (the module says how)."""
    assert kernel_cache.modules(), "numba is installed but the loops cannot be had"
    assert kernel_cache.stale(kernel_cache.recorded(), kernel_cache.dispatchers()) == []


def test_a_signature_file_is_parsed_not_evaluated():
    for text in ("__import__('os').system('true')", "(Array.__class__,)", "(open('x'),)"):
        with pytest.raises(ValueError):
            kernel_cache.parse_signature(text)


def _signatures_of_digits(tmp_path, work) -> dict:
    pb = next((work / "builds").rglob("*.pb"))
    out = tmp_path / "used.json"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_kernel_signatures.py"), "--child", str(pb),
                        str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def test_the_list_holds_what_the_digits_example_calls(tmp_path):
    work = workdir(tmp_path)
    assert cli("convert", "--config=deploy.yml", cwd=work).returncode == 0
    used = _signatures_of_digits(tmp_path, work)
    listed = set(kernel_cache.recorded())
    missing = [(n, s) for n, sigs in used.items() for s in sigs if (n, s) not in listed]
    assert used and not missing, f"run tools/gen_kernel_signatures.py: {missing[:3]}"


def test_a_cold_run_says_it_compiles_and_warmup_makes_the_next_first_run_compile_nothing(tmp_path):
    work = workdir(tmp_path)
    assert cli("convert", "--config=deploy.yml", cwd=work).returncode == 0
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cold"))   # empty: nothing compiled yet
    env.pop("MACE_NO_JIT", None)
    first = cli("run", "--config=deploy.yml", cwd=work, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(NOTE) == 1 and first.stderr.count(DONE) == 1, first.stderr
    again = cli("run", "--config=deploy.yml", cwd=work, env=env)
    assert again.returncode == 0 and "compil" not in again.stderr, again.stderr

    # the hint the note gives, on another cold cache, for the signatures digits calls
    used = _signatures_of_digits(tmp_path, work)
    listed = tmp_path / "digits.txt"
    kernel_cache.write_recorded(used, listed)
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "warmed")
    hint = kernel_cache.WARMUP_HINT.split()[2:]   # python tools/converter.py <warmup>
    warm = cli(*hint, "--signatures", listed, cwd=work, env=env, timeout=600)
    n = sum(len(v) for v in used.values())
    assert warm.returncode == 0, warm.stderr
    assert f"warmup: {n} kernel signatures" in warm.stdout and " 0 stale" in warm.stdout, warm.stdout
    assert " 0 compiled now" not in warm.stdout, warm.stdout
    cold_model = cli("run", "--config=deploy.yml", cwd=work, env=env)
    assert cold_model.returncode == 0 and "compil" not in cold_model.stderr, cold_model.stderr
    twice = cli(*hint, "--signatures", listed, cwd=work, env=env)
    assert " 0 compiled now" in twice.stdout, twice.stdout


def test_warmup_refuses_a_missing_or_empty_list(tmp_path):
    r = cli("warmup", "--signatures", tmp_path / "none.txt", cwd=tmp_path)
    assert r.returncode == 1 and "none.txt: no such file" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "empty.txt").write_text("# nothing\n")
    r = cli("warmup", "--signatures", tmp_path / "empty.txt", cwd=tmp_path)
    assert r.returncode == 1 and "lists no kernel signatures" in r.stderr, r.stderr


def test_every_loop_module_is_warmed():
    """A new mace/ops/fast/<...>_loops.py must be listed, or warmup never compiles its kernels."""
    from pathlib import Path
    fast = Path(kernel_cache.__file__).parent
    files = {f"mace.ops.fast.{p.stem}" for p in fast.glob("_*loops.py")}
    files |= {f"mace.ops.fast.int8.{p.stem}" for p in (fast / "int8").glob("_*loops.py")}
    listed = set(kernel_cache.LOOP_MODULES) | {f"mace.ops.fast.{m}" for m in kernel_cache.OP_LOOP_MODULES}
    assert files <= listed, sorted(files - listed)


def test_an_installed_wheel_caches_its_loops_in_the_users_folder(monkeypatch, tmp_path):
    """A checkout keeps numba's in-tree __pycache__; an installed wheel's loop files go to the
    user-wide folder (pip uninstall would leave in-tree cache files behind as a `mace` namespace
    package shadowing the next install: tests/project/test_install.py has the whole story), and a
    folder the user names still wins."""
    from mace.ops.fast import _cache_place, _loops

    _cache_place.install()
    _cache_place.install()   # idempotent
    classes = _cache_place._numba("CacheImpl")._locator_classes
    assert classes.count(_cache_place.locator_class()) == 1
    assert classes.index(_cache_place._numba("UserProvidedCacheLocator")) \
        < classes.index(_cache_place.locator_class()) < classes.index(_cache_place._numba("InTreeCacheLocator"))
    fn = next(obj.py_func for obj in vars(_loops).values() if hasattr(obj, "py_func"))
    src = _loops.__file__
    assert _cache_place.locator_class().from_function(fn, src) is None   # this checkout
    monkeypatch.setattr(_cache_place, "_installed", lambda: True)   # as an installed wheel
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    locator = _cache_place.locator_class().from_function(fn, src)
    assert locator is not None and Path(locator.get_cache_path()).is_relative_to(tmp_path)
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def f():\n    pass\n")
    assert _cache_place.locator_class().from_function(fn, str(outside)) is None
