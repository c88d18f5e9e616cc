"""`gpu_fp32_ops: auto`'s check, on the CPU (no OpenCL needed): what half storage would clamp or
flush per GPU op, and which ops it keeps in float, against hand-computed values."""
import numpy as np

from mace.ir.args import get_arg
from mace.ops.gpu.support import GPU
from mace.validate.fp16_storage import check_fp16, half_round, mark_fp32_ops
from tests.gpu.gpu_case import chain_graph

X = np.array([1, 2, -3, 0.5, 0.25, 0, 4, -8], np.float32).reshape(1, 1, 1, 8)


def placed(g):
    for op in g.net.op:
        op.device_type = GPU
    return g


def test_half_round_clamps_and_flushes():
    got = half_round(np.float32([70000, -1e6, 2.0 ** -26, 2.0 ** -24, 1.0 + 2.0 ** -12, np.nan]))
    assert got[0] == 65504 and got[1] == -65504 and got[2] == 0 and got[3] == 2.0 ** -24
    assert got[4] == 1.0 and np.isnan(got[5])        # 1 + 2^-12 is below half's resolution at 1


def test_saturating_op_is_kept_and_the_rest_stays_half():
    # op0: x * 40000 (four values beyond 65504), op1: softmax (0..1, fine in half)
    g = placed(chain_graph([("Eltwise", ["x", "big"], ["a"], {"type": "PROD"}),
                            ("Softmax", ["a"], ["y"], {})], {"x": X}, {"big": np.float32([40000])}))
    r = check_fp16(g, {"op0", "op1"}, [{"x": X}], target=0.999)
    by = {n.name: n for n in r.nodes}
    assert (by["op0"].values, by["op0"].clamped, by["op0"].subnormal) == (8, 4, 0)
    assert by["op1"].clamped == 0
    assert [n.name for n in r.fp32] == ["op0"]
    # clamped: 80000 and 160000 both become 65504, so softmax splits 0.5 / 0.5 instead of 0 / 1
    assert r.cosine_fp16 < 0.75 and r.cosine_fallback > 0.9999 and r.reached


def test_underflow_is_kept_only_when_it_costs_accuracy():
    # op0 scales into half's subnormals (x * 2^-20), op1 scales back up (* 2^20): the rounding
    # of op0's output survives into y (values 2^-22 .. 2^-17 keep 3 to 8 significant bits)
    steps = [("Eltwise", ["x", "tiny"], ["a"], {"type": "PROD"}),
             ("Eltwise", ["a", "huge"], ["y"], {"type": "PROD"})]
    x = (X + np.float32(0.1)).astype(np.float32)    # not exactly representable: rounding shows
    g = placed(chain_graph(steps, {"x": x}, {"tiny": np.float32([2.0 ** -20]), "huge": np.float32([2.0 ** 20])}))
    r = check_fp16(g, {"op0", "op1"}, [{"x": x}], target=0.99999)
    by = {n.name: n for n in r.nodes}
    assert by["op0"].subnormal == 8 and by["op0"].sqnr_db < 60
    assert [n.name for n in r.fp32] == ["op0"] and r.reached
    relaxed = check_fp16(g, {"op0", "op1"}, [{"x": x}], target=0.99)
    assert relaxed.fp32 == [] and relaxed.cosine_fp16 >= 0.99   # good enough in half: nothing kept


def test_mark_fp32_ops_writes_the_op_arguments():
    g = placed(chain_graph([("Eltwise", ["x", "big"], ["a"], {"type": "PROD"}),
                            ("Softmax", ["a"], ["y"], {})], {"x": X}, {"big": np.float32([40000])}))
    notes = mark_fp32_ops(g, "auto", lambda: [{"x": X}], "deploy.yml: models.m")
    ops = {op.name: op for op in g.net.op}
    assert get_arg(ops["op0"], "gpu_fp32", 0) == 1 and get_arg(ops["op1"], "gpu_fp32", 0) == 0
    assert "saturates in fp16: 4 of 8 values" in get_arg(ops["op0"], "gpu_fp32_reason", "")
    assert any("GPU op op0 (Eltwise) keeps float storage" in n for n in notes)


def test_a_nan_from_a_flushed_value_is_a_miss_not_a_pass():
    # op0: x * 2^-30 is below 2^-25 for every x here: half stores 0, and op1's a / a is 0 / 0 = NaN
    # (in float it is 1 everywhere). A NaN cosine must read as a miss (min() would keep 1.0).
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 1, 8)
    g = placed(chain_graph([("Eltwise", ["x", "tiny"], ["a"], {"type": "PROD"}),
                            ("Eltwise", ["a", "a"], ["y"], {"type": "DIV"})], {"x": x},
                           {"tiny": np.float32([2.0 ** -30])}))
    r = check_fp16(g, {"op0", "op1"}, [{"x": x}], target=0.999)
    assert {n.name: n.flushed for n in r.nodes}["op0"] == 8
    assert r.cosine_fp16 == -1.0 and [n.name for n in r.fp32] == ["op0"] and r.cosine_fallback > 0.9999999
