"""What a chain of compiled steps compiles to (mace/ops/fast/chain.py writes the chains; each
is one call of `run_steps` here).

A chain gets its steps' arguments as two arrays: ints (int64: each step's machine code address,
its arrays as address, shape and strides, its int and bool scalars) and floats (float64: its
float scalars), and a literal plan saying where each argument lies and what type it has.
`run_steps` turns the plan into straight-line code: load each argument, build each array as
exactly the type its step was compiled for (dtype, layout, read-only flag; the array owns
nothing: the chain's owner keeps the real arrays alive), and call the step's machine code by
address with numba's own calling convention (a return slot, an exception slot, the arguments
flattened). An exception a step raises propagates out of the chain as it would out of the step;
before each step its position goes into the last int slot, so the caller can name it.

Why this shape: numba unboxes each array argument of a Python call (~40 ns) and a wake-word
model's 18 steps pass ~70 arrays a run; calling the steps' dispatchers from the chain would
link their code into it and compile it all again (~1 s a chain: the packed GEMM is large); and
a chain written as Python (one `v[i]` per value) spends ~1.5 s typing its ~500 indexings. As one
intrinsic over a plan it compiles in well under a second and caches like any function, nothing
process-specific baked in.

The plan (a Python literal, read with ast.literal_eval): a tuple of steps, each
(address slot, (argument, ...)); an argument is ("a", slot, dtype, ndim, layout, readonly,
aligned) for an array at ints[slot] with its shape and strides after it, ("i", slot) an int64
and ("b", slot) a bool from ints, ("f", slot) a float64 and ("s", slot) a float32 from floats,
("t", (argument, ...)) a tuple.
"""
from __future__ import annotations

import ast

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.callconv import excinfo_t
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array
from numba.np.numpy_support import from_dtype


def arg_type(arg) -> types.Type:
    """numba's type of plan argument `arg` (what numba.typeof gives the real argument)."""
    kind = arg[0]
    if kind == "a":
        _, _, dtype, ndim, layout, readonly, aligned = arg
        return types.Array(from_dtype(np.dtype(dtype)), ndim, layout, readonly=readonly, aligned=aligned)
    if kind == "t":
        inner = [arg_type(a) for a in arg[1]]
        return types.UniTuple(inner[0], len(inner)) if inner and len(set(inner)) == 1 else types.Tuple(inner)
    return {"i": types.int64, "b": types.boolean, "f": types.float64, "s": types.float32}[kind]


@intrinsic(prefer_literal=True)
def run_steps(typingctx, ints, floats, plan):
    """Run the steps of literal `plan` (see the module's docstring) over `ints` and `floats`."""
    if not isinstance(plan, types.StringLiteral):
        return None
    steps = ast.literal_eval(plan.literal_value)

    def codegen(context, builder, sig, args):
        i64, f64 = (make_array(t)(context, builder, value=v).data for t, v in zip(sig.args[:2], args[:2]))
        nints = make_array(sig.args[0])(context, builder, value=args[0]).nitems
        progress = builder.gep(i64, [builder.sub(nints, ir.Constant(nints.type, 1))])

        def load(base, slot):
            return builder.load(builder.gep(base, [ir.Constant(ir.IntType(64), slot)]))

        def value(arg):
            kind = arg[0]
            if kind == "a":
                aryty, slot, ndim = arg_type(arg), arg[1], arg[3]
                ary = make_array(aryty)(context, builder)
                item = context.get_data_type(aryty.dtype)
                populate_array(ary, data=builder.inttoptr(load(i64, slot), item.as_pointer()),
                               shape=[load(i64, slot + 1 + d) for d in range(ndim)],
                               strides=[load(i64, slot + 1 + ndim + d) for d in range(ndim)],
                               itemsize=context.get_constant(types.intp, context.get_abi_sizeof(item)),
                               meminfo=None)
                return ary._getvalue()
            if kind == "t":
                return context.make_tuple(builder, arg_type(arg), [value(a) for a in arg[1]])
            if kind == "i":
                return load(i64, arg[1])
            if kind == "b":
                return builder.icmp_signed("!=", load(i64, arg[1]), ir.Constant(ir.IntType(64), 0))
            if kind == "f":
                return load(f64, arg[1])
            return builder.fptrunc(load(f64, arg[1]), ir.FloatType())

        conv = context.call_conv
        for k, (address, plan_args) in enumerate(steps):
            argtys = [arg_type(a) for a in plan_args]
            builder.store(ir.Constant(ir.IntType(64), k), progress)
            fnty = conv.get_function_type(types.none, argtys)
            callee = builder.inttoptr(load(i64, address), fnty.as_pointer())
            retty = conv.get_return_type(types.none).pointee
            ret = cgutils.alloca_once(builder, retty)
            builder.store(cgutils.get_null_value(retty), ret)
            exc = cgutils.alloca_once(builder, ir.PointerType(excinfo_t), name="excinfo")
            flat = list(conv._get_arg_packer(argtys).as_arguments(builder, [value(a) for a in plan_args]))
            code = builder.call(callee, [ret, exc] + flat)
            status = conv._get_return_status(builder, code, builder.load(exc))
            with cgutils.if_unlikely(builder, status.is_error):
                conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return types.none(ints, floats, plan), codegen
