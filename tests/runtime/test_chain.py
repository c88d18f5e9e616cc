"""Chains (mace/ops/fast/chain.py): a run of compiled steps as one compiled call. A small
model's chained engine gives the unchained engine's bytes run after run (state carried, reset,
new inputs), a failing step inside a chain names its op, and only what a chain can pass is
chained."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from onnx import helper

from mace import onnx_backend
from mace.errors import ModelError
from mace.ops.fast._jit import loops
from mace.runtime import program
from mace.runtime.engine import CHAIN_AFTER_RUNS, Engine
from tests.ops.ir_graph import graph_of
from tests.ops.onnx_case import rand
from tests.ops.onnx_graph import graph_model, run_ort

pytestmark = pytest.mark.skipif(loops() is None, reason="numba is not installed here: no compiled steps to chain")


def _chains(engine) -> list:
    from mace.ops.fast.chain import Chain
    return [call for call in engine._program if isinstance(call, Chain)]


def _parallel_chains(engine) -> list:
    from mace.ops.fast.chain import ParallelChain
    return [call for call in engine._program if isinstance(call, ParallelChain)]


def _small_cnn(size=10, group=8):
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], group=group, pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["res"]),
             helper.make_node("GlobalAveragePool", ["res"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1)]
    consts = {"w1": rand(8, 3, 3, 3, seed=1), "b1": rand(8, seed=2), "w2": rand(8, 8 // group, 3, 3, seed=3),
              "w3": rand(5, 8, seed=4), "b3": rand(5, seed=5)}
    x = rand(1, 3, size, size, seed=6)
    return graph_model(nodes, {"x": x}, {"y": np.float32}, consts), x


def _engine(model, x, after=None):
    """The converted model's CPU engine, chaining after `after` runs (None: the default)."""
    graph = onnx_backend.prepare(model, {"x": x}).graph
    return Engine(graph, options={} if after is None else {"chain_after_runs": after})


def test_a_small_model_chained_gives_the_unchained_bytes():
    model, x = _small_cnn()
    plain, chained = _engine(model, x, -1), _engine(model, x, 2)
    rng = np.random.default_rng(0)
    for k in range(6):
        feed = {"x": rng.normal(size=x.shape).astype(np.float32)}
        want, got = plain.run(feed)["y"], chained.run(feed)["y"]
        np.testing.assert_array_equal(got, want, err_msg=f"run {k}")
        np.testing.assert_allclose(got, run_ort(model, feed)[0], rtol=1e-5, atol=1e-5)
    (chain,) = _chains(chained)
    assert len(chain.indices) >= 4, "most of the model's steps are in the chain"
    assert not _chains(plain)


def _stream_graph():
    """A streaming layer (StreamBuffer: the state carried between runs) between compiled steps."""
    init = np.random.default_rng(5).normal(size=(1, 3, 8)).astype(np.float32)
    ops = [("Activation", ["x"], ["a"], {"activation": "SIGMOID"}),
           ("StreamBuffer", ["a", "init"], ["s"], {"axis": 1, "variable": "v"}),
           ("Activation", ["s"], ["y"], {"activation": "LEAKYRELU", "activation_coefficient": 0.1})]
    return graph_of({"x": (1, 2, 8)}, ops, {"init": init})


def test_a_chained_stream_carries_and_resets_its_state():
    plain = Engine(_stream_graph(), options={"chain_after_runs": -1})
    chained = Engine(_stream_graph(), options={"chain_after_runs": 1})
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.normal(size=(1, 2, 8)).astype(np.float32)} for _ in range(8)]
    for k, feed in enumerate(feeds):
        if k == 5:
            plain.reset_state(), chained.reset_state()
        np.testing.assert_array_equal(chained.run(feed)["y"], plain.run(feed)["y"], err_msg=f"run {k}")
    assert [len(c.indices) for c in _chains(chained)] == [3]
    assert not np.array_equal(plain.run(feeds[0])["y"], plain.run(feeds[0])["y"])   # the state moved


def test_chaining_waits_for_runs_and_skips_large_models():
    model, x = _small_cnn()
    engine = _engine(model, x)
    for _ in range(3):
        engine.run({"x": x})
    assert not _chains(engine), f"chained before CHAIN_AFTER_RUNS ({CHAIN_AFTER_RUNS}) runs"
    for _ in range(CHAIN_AFTER_RUNS - 3):
        engine.run({"x": x})
    assert _chains(engine), f"not chained after CHAIN_AFTER_RUNS ({CHAIN_AFTER_RUNS}) runs"
    model, big = _small_cnn(size=200)   # 8 x 27 x 40k multiply-adds: above the small-run line
    graph = onnx_backend.prepare(model, {"x": big}).graph
    large = Engine(graph, options={"chain_after_runs": 1, "num_threads": 1})
    large.run({"x": big}), large.run({"x": big})
    assert not _chains(large) and not _parallel_chains(large)   # (on more threads: a parallel chain)


def test_a_failing_step_in_a_chain_names_its_op():
    from tests.runtime import _chain_steps as steps
    model, x = _small_cnn()
    engine = _engine(model, x, -1)
    engine.run({"x": x})
    a, b = np.ones(4, np.float32), np.ones(4, np.float32)
    out = np.zeros(4, np.float32)
    calls = [partial(steps.scaled, a, 2.0, out), partial(steps.scaled, b, 3.0, out)]
    for call in calls:   # the loops' machine code exists (as after a run)
        call()
    victim = len(engine.nodes) - 2
    engine._calls = (calls, [0, victim])
    engine._chain()
    (chain,) = _chains(engine)
    engine.run({"x": x})
    np.testing.assert_array_equal(out, 3.0)
    b[0] = -1.0
    op = engine.nodes[victim].op
    with pytest.raises(ModelError, match=rf"op '{op.name}' \({op.type}\) failed: negative first value"):
        engine.run({"x": x})


def test_what_a_chain_passes_and_what_ends_one():
    from tests.runtime import _chain_steps as steps
    a = np.arange(12, dtype=np.float32).reshape(6, 2)
    a.flags.writeable = False
    b = np.arange(12, dtype=np.float32)[::2]   # strided
    out_plain, out_chain = np.zeros(6, np.float32), np.zeros(6, np.float32)

    def mixed(out, flag):
        return partial(steps.mixed, a, b, 5, np.float32(0.5), flag, out)

    for out in (out_plain, out_chain):
        mixed(out, True)(), mixed(out, False)()
    out_plain[:] = out_chain[:] = 0
    calls = [mixed(out_chain, True), partial(steps.scaled, out_chain, 2.0, out_chain), mixed(out_chain, False),
             partial(np.copyto, out_chain, 1.0),                              # not compiled
             partial(steps.scaled, out_chain, 2.0, out_chain),
             partial(steps.parallel_copy, out_chain, out_chain),              # a parallel loop
             partial(steps.scaled, out_chain, np.float32(2.0), out=out_chain)]  # a keyword
    made, owners = program.chained(calls, list(range(len(calls))))
    assert [type(c).__name__ for c in made] == ["Chain", "partial", "partial", "partial", "partial"]
    assert owners == [None, 3, 4, 5, 6]
    made[0]()
    mixed(out_plain, True)(), steps.scaled(out_plain, 2.0, out_plain), mixed(out_plain, False)()
    np.testing.assert_array_equal(out_chain, out_plain)
    total = [partial(steps.total, a[:, 0].copy())] * 2
    total[0]()
    assert program.chained(total, [0, 1])[1] == [0, 1], "a loop returning a value is not chained"
    never = [partial(steps.scaled, np.ones(3, np.int16), 1, np.ones(3, np.int16))] * 2
    assert program.chained(never, [0, 1])[1] == [0, 1], "no machine code for these types yet"
    zero_d = np.zeros((), np.float32)
    steps.mixed(a, b, 1, np.float32(1), True, out_plain)
    assert program.chained([partial(steps.scaled, zero_d, 1.0, out_plain)] * 2, [0, 1])[1] == [0, 1]
    first = np.zeros(1, np.float32)
    inner = [partial(steps.from_closure, b, first), partial(steps.from_closure, first, first)]
    for call in inner:
        call()
    first[0] = 0
    made, owners = program.chained(inner, [0, 1])
    assert owners == [None]
    made[0]()
    assert first[0] == b[0] + 2


def test_compiling_a_chain_does_not_announce_the_warmup_hint(caplog):
    """The first compile of a process logs the note that `warmup` compiles the kernels ahead;
    a chain (generated per model) is not what warmup compiles: its own note once (a parallel
    chain compiles for seconds the first time), not the warmup hint, which still comes for a
    kernel after it."""
    from types import SimpleNamespace

    from mace.ops.fast import _compile_events as events

    def event(module):
        dispatcher = SimpleNamespace(__name__="chain", py_func=SimpleNamespace(__module__=module))
        return SimpleNamespace(data={"dispatcher": dispatcher})

    listener = events._Listener()
    with caplog.at_level("WARNING", logger="mace.jit"):
        for _ in range(2):
            listener.on_start(event(events.CHAIN_MODULES + "0123")), listener.on_end(None)
        assert not listener.announced and listener.chain_announced
        assert [r.getMessage() for r in caplog.records] == ["note: " + events.CHAIN_NOTE]
        listener.on_start(event("mace.ops.fast._loops")), listener.on_end(None)
    assert listener.announced and caplog.records[-1].getMessage() == "note: " + events.FIRST_NOTE
    assert events.WARMUP_HINT not in events.CHAIN_NOTE


def test_a_chain_is_written_once_per_structure_to_the_users_cache(monkeypatch, tmp_path):
    """The generated source goes to the user's cache folder, named by its hash: two engines of
    one structure at other shapes share it (shapes and addresses arrive at run time), and a
    file whose text is not the chain's (tampered, truncated) is written again before use."""
    from mace.ops.fast import chain as chain_module

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(chain_module, "_loaded", {})
    folder = tmp_path / "pymace" / "chains"
    assert chain_module.chain_dir() == folder
    for size in (10, 12):
        model, x = _small_cnn(size)
        engine = _engine(model, x, 1)
        plain = _engine(model, x, -1)
        for _ in range(3):
            np.testing.assert_array_equal(engine.run({"x": x})["y"], plain.run({"x": x})["y"])
        assert _chains(engine)
    (source,) = folder.glob("chain_*.py")
    source.write_text("raise SystemExit('not ours')\n")
    monkeypatch.setattr(chain_module, "_loaded", {})
    engine = _engine(model, x, 1)
    engine.run({"x": x}), engine.run({"x": x})
    assert _chains(engine) and "run_steps" in source.read_text()


def test_the_chain_cache_keeps_the_most_recently_used(tmp_path):
    """Past MAX_CACHED chains, writing a new one removes the least recently used (access
    time) sources with numba's cache files for them; the newest and the one just written stay.
    Using a chain marks its access time and leaves its modification time (numba's stamp)."""
    import os
    from mace.ops.fast import chain as chain_module

    cache = tmp_path / "__pycache__"
    cache.mkdir()
    names = [f"chain_{i:020d}" for i in range(6)]
    for age, name in enumerate(names):   # names[0] the newest, names[5] the oldest
        for f in (tmp_path / f"{name}.py", cache / f"{name}.chain-9.py311.nbi", cache / f"{name}.chain-9.py311.1.nbc"):
            f.write_text("x")
            os.utime(f, (1e9 - age * 100, 5e8))
    (cache / "other.nbi").write_text("x")
    just_written = tmp_path / f"{names[5]}.py"
    assert chain_module._prune(tmp_path, keep=just_written, limit=3) == 2
    left = sorted(p.name for p in tmp_path.glob("chain_*.py"))
    assert left == sorted(f"{n}.py" for n in names[:3] + names[5:])
    assert sorted(p.name.split(".")[0] for p in cache.glob("chain_*")) == sorted(2 * (names[:3] + names[5:]))
    assert (cache / "other.nbi").exists()
    assert chain_module._prune(tmp_path, keep=just_written, limit=10) == 0


def test_using_a_cached_chain_keeps_numbas_stamp(monkeypatch, tmp_path):
    """A chain loaded again gets a new access time (what pruning goes by), not a new
    modification time: numba's cache is stamped with it and would compile the chain again."""
    import os
    from mace.ops.fast import chain as chain_module

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(chain_module, "_loaded", {})
    model, x = _small_cnn(10)
    engine = _engine(model, x, 1)
    engine.run({"x": x}), engine.run({"x": x})
    (source,) = (tmp_path / "pymace" / "chains").glob("chain_*.py")
    os.utime(source, ns=(1_000_000_000, source.stat().st_mtime_ns))
    stamp = source.stat().st_mtime_ns
    monkeypatch.setattr(chain_module, "_loaded", {})
    engine = _engine(model, x, 1)
    engine.run({"x": x}), engine.run({"x": x})
    assert _chains(engine)
    assert source.stat().st_mtime_ns == stamp and source.stat().st_atime_ns > 1_000_000_000


@pytest.fixture
def two_threads(monkeypatch):
    """The compute pool on two threads whatever else the machine runs (the `auto` wait policy
    would size runs to the cores other processes leave free: it has its own tests)."""
    from mace.ops.fast import _pool
    pool = _pool.process_pool()
    if pool is None:
        pytest.skip("no compute pool here (numba's OpenMP layer, numpy's 64-bit OpenBLAS): nothing splits")
    monkeypatch.setattr(pool, "_contention", None)
    return pool


def _pooled(model, x, after):
    graph = onnx_backend.prepare(model, {"x": x}).graph
    return Engine(graph, options={"chain_after_runs": after, "num_threads": 2, "split_small_runs": True})


def _chained_after_one_run(model, x, sources: list) -> tuple:
    """(unchained, chained) two-thread engines of `model`, the second chained after one run;
    the source of each chain that run compiled appended to `sources`."""
    from mace.ops.fast import chain as chain_mod
    real = chain_mod._compiled

    def spy(source):
        sources.append(source)
        return real(source)
    plain, chained = _pooled(model, x, -1), _pooled(model, x, 1)
    chain_mod._compiled = spy
    try:
        chained.run({"x": x})   # chained after this first run
    finally:
        chain_mod._compiled = real
    return plain, chained


def test_split_steps_chain_into_one_parallel_region_with_the_unchained_bytes(two_threads):
    """On two threads the pool's split steps (a conv, a depthwise conv, an add: each a parallel
    region of its own) and the serial steps between them run as one ParallelChain: the bytes of
    the unchained engine, run after run."""
    from mace.ops.fast._pool import Split
    model, x = _small_cnn(size=64)
    plain, chained = _pooled(model, x, -1), _pooled(model, x, 1)
    assert sum(type(c) is Split for c in plain._program) >= 2, "nothing splits: the test tests nothing"
    rng = np.random.default_rng(2)
    for k in range(5):
        feed = {"x": rng.normal(size=x.shape).astype(np.float32)}
        want, got = plain.run(feed)["y"], chained.run(feed)["y"]
        np.testing.assert_array_equal(got, want, err_msg=f"run {k}")
        np.testing.assert_allclose(got, run_ort(model, feed)[0], rtol=1e-4, atol=1e-5)
    (chain,) = _parallel_chains(chained)
    assert sum(type(c) is Split for c in chain.calls) >= 2 and len(chain.calls) >= 4


def test_a_parallel_chain_on_fewer_threads_than_parts_runs_every_part(two_threads, monkeypatch):
    """Where the pool runs fewer threads than a chain's parts (the `auto` policy leaving a busy
    core to another process: one thread), the threads there take the missing parts: no wait on
    a part nobody runs, the same bytes."""
    model, x = _small_cnn(size=64)
    plain, chained = _pooled(model, x, -1), _pooled(model, x, 1)
    chained.run({"x": x}), chained.run({"x": x})
    assert _parallel_chains(chained)

    class OneCore:
        def threads(self, want):
            return 1
    monkeypatch.setattr(two_threads, "_contention", OneCore())
    feed = {"x": np.random.default_rng(3).normal(size=x.shape).astype(np.float32)}
    try:
        np.testing.assert_array_equal(chained.run(feed)["y"], plain.run(feed)["y"])
        assert two_threads._numba_threads == 1
    finally:   # the next session sets numba's count again, whatever this one left
        two_threads._numba_threads = None


def test_a_failing_split_step_in_a_parallel_chain_names_its_step(two_threads):
    """A part failing inside the parallel region: the steps after it do not run on its garbage,
    and the chain raises that step's own error with `at` its node (what the engine names)."""
    from mace.ops.fast._pool import Split
    from mace.ops.fast.chain import ParallelChain
    from tests.runtime import _chain_steps as steps
    x = np.arange(1, 101, dtype=np.float32)
    mid, out, last = np.zeros(100, np.float32), np.zeros(100, np.float32), np.zeros(4, np.float32)
    session = two_threads.session(2)

    def split(src, dst, factor):
        return Split(two_threads, session, steps.scaled_rows_par, steps.scaled_rows, (src, factor, dst), 100, 2)
    calls = [split(x, mid, 2.0), partial(steps.scaled, last, 1.0, last), split(mid, out, 3.0)]
    with session:
        for call in calls:
            call()
        made, owners = program.chained(calls, [7, 8, 9], width=2)
        assert [type(c) for c in made] == [ParallelChain] and owners == [None]
        out[:] = 0
        made[0]()
        np.testing.assert_array_equal(out, x * 6)
        x[80] = -1.0   # the second half of the first step fails
        out[:] = -5.0
        with pytest.raises(ValueError, match="negative value"):
            made[0]()
        assert made[0].at == 7
        np.testing.assert_array_equal(out, -5.0)   # the last step never ran


def test_a_forked_child_runs_a_parallel_chains_steps_one_by_one(two_threads):
    """GNU OpenMP cannot run in a forked child: a parallel-chained engine run there calls its
    steps one by one (each split step its serial loop), with the parent's bytes."""
    import os
    if not hasattr(os, "fork"):
        pytest.skip("no os.fork on this platform")
    model, x = _small_cnn(size=64)
    engine = _pooled(model, x, 1)
    engine.run({"x": x})
    want = engine.run({"x": x})["y"]
    assert _parallel_chains(engine)
    from tests.ops.test_compute_pool import in_forked_child
    np.testing.assert_array_equal(in_forked_child(lambda: engine.run({"x": x})["y"]), want)


def test_one_parallel_chain_serves_every_shape_of_a_model(two_threads):
    """A split step's rows are a run-time value, not part of the chain's source: the same model
    at another input size reuses the chain compiled for the first (a sequence model fed many
    lengths compiles once, not once per length), each with its own bytes right."""
    sources = []
    for size in (64, 72):
        model, x = _small_cnn(size=size)
        plain, chained = _chained_after_one_run(model, x, sources)
        assert _parallel_chains(chained)
        feed = {"x": np.random.default_rng(size).normal(size=x.shape).astype(np.float32)}
        np.testing.assert_array_equal(chained.run(feed)["y"], plain.run(feed)["y"])
    assert len(sources) == 2 and sources[0] == sources[1]


def test_models_compile_a_serial_body_and_share_one_parallel_launcher(two_threads):
    """What a model compiles for its parallel chain is a serial function (the body each thread
    runs); the parallel region is _chain_loops.launch, one function for every model, calling the
    body by address. A parallel function per model took LLVM seconds (numba compiles its
    outlined body again in each library that links it): mp_face_detection 7 s, 1.5 s now."""
    from mace.ops.fast._jit import op_loops
    sources, made = [], []
    for group in (8, 1):   # a depthwise conv, then a dense one: two structures
        model, x = _small_cnn(size=64, group=group)
        plain, chained = _chained_after_one_run(model, x, sources)
        (chain,) = _parallel_chains(chained)
        made.append(chain)
        np.testing.assert_array_equal(chained.run({"x": x})["y"], plain.run({"x": x})["y"])
    assert len(sources) == 2 and sources[0] != sources[1], "two structures, two bodies"
    assert not any("parallel=True" in s or "prange" in s for s in sources)
    launch = op_loops("_chain_loops").launch
    assert made[0].func.func is made[1].func.func and len(launch.signatures) == 1
    assert made[0].func.args[0] != made[1].func.args[0], "each calls its own body"


def test_a_chain_names_the_version_of_the_loops_it_calls(monkeypatch):
    """numba checks a cached function against its own file only: a chain's source carries a hash
    of _chain_loops.py, so a changed run_steps / run_part (an upgrade) gives every chain a new
    name instead of loading one compiled against the old."""
    from mace.ops.fast import chain as chain_module
    from tests.runtime import _chain_steps as steps
    a, out = np.ones(4, np.float32), np.zeros(4, np.float32)
    calls = [partial(steps.scaled, a, 2.0, out), partial(steps.scaled, out, 3.0, out)]
    for call in calls:
        call()
    entries = [chain_module._entry(c) for c in calls]
    now = chain_module._generated(calls, entries)[0]
    assert f"# _chain_loops {chain_module._loops_stamp()}" in now
    monkeypatch.setattr(chain_module, "_loops_stamp", lambda: "0" * 16)
    assert chain_module._generated(calls, entries)[0] != now


@pytest.mark.parametrize("first,note", [("chain", "CHAIN_NOTE"), ("pgemm", "FIRST_NOTE")])
def test_the_cli_names_warmup_only_when_a_kernel_compiles_first(first, note):
    """The CLI's compile line: a model's chain compiling first (all its kernels cached) gets the
    chain's note, which names no command (warmup could not have compiled it ahead)."""
    import io

    from rich.console import Console

    from mace.cli._compile_notice import _Notice
    from mace.ops.fast import kernel_cache
    out = io.StringIO()
    notice = _Notice(Console(file=out, width=300))
    notice.started(first, first == "chain"), notice.finished()
    assert out.getvalue().splitlines()[0] == "note: " + getattr(kernel_cache, note)
