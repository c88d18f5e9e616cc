"""The register tiles' IR (mace/ops/fast/_tile_ir.py's loop nest, under the float tile of
_loops.py and the int8 tile of int8/_qloops.py): every shape and mode each GEMM dispatches to
builds IR that LLVM verifies, with the loop nest's blocks, one k loop per segment of the int8
tile and two of the float one. Built with llvmlite alone, nothing compiled: a change to the
shared helper that breaks either tile fails here in a second, not at a model's first run."""
import pytest

from mace.ops.fast import _jit

pytestmark = pytest.mark.skipif(_jit.loops() is None, reason="numba is not installed: no tiles")

llvm = pytest.importorskip("llvmlite.binding")
ir = pytest.importorskip("llvmlite.ir")

I64, F32 = ir.IntType(64), ir.FloatType()


def _verified(module) -> str:
    text = str(module)
    llvm.parse_assembly(text).verify()
    return text


def _blocks(text: str, fn: str) -> list:
    body = text.split(f'@"{fn}"', 1)[1]
    return [line[:-1] for line in body.splitlines() if line.endswith(":")]


@pytest.mark.parametrize("rows", range(1, 9))
@pytest.mark.parametrize("vecs", (1, 2))
def test_float_tile_ir_verifies(rows, vecs):
    loops = _jit.loops()
    module = ir.Module(name="float_tile")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * 8 + [F32, F32]), name="tile")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    loops._TileIR(builder, rows, vecs).emit(*fn.args)
    builder.ret_void()
    text = _verified(module)
    assert _blocks(text, "tile") == ["entry", "segment", "k_loop", "k_rest_head", "k_rest", "segment_end",
                                     "k_done"]
    # an fma per row and vector in each of the UNROLL steps of the main k loop and the rest loop's one
    assert text.count('call <16 x float> @"llvm.fma.v16f32"') == (loops.UNROLL + 1) * rows * vecs


@pytest.mark.parametrize("mode", (0, 1, 2, 3))
@pytest.mark.parametrize("rows", (12, 8, 4, 2, 1))
@pytest.mark.parametrize("vecs", (1, 2))
def test_int8_tile_ir_verifies(mode, rows, vecs):
    from mace.ops.fast.int8 import _qjit

    qloops = _qjit.qloops()
    if qloops is None:
        pytest.skip("no int8 loops here")
    module = ir.Module(name="int8_tile")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * 13), name="qtile")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    qloops._qtile_ir(builder, rows, vecs, mode, *fn.args)
    builder.ret_void()
    text = _verified(module)
    assert _blocks(text, "qtile") == ["entry", "segment", "k_loop", "segment_end", "k_done"]
    # a dot product per row and vector in the one k step: vpdpbusd, or its plain-IR form
    dots = text.count('call <16 x i32> @"llvm.x86.avx512.vpdpbusd.512"') if mode & 1 and qloops.VNNI else \
        text.count("zext <64 x i8>")
    assert dots == rows * vecs
