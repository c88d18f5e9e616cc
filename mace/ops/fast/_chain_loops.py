"""What a chain of compiled steps compiles to (mace/ops/fast/chain.py writes the chains; each
is one call of `run_steps` here, or, for a parallel chain, one thread's `run_part`, which
`launch`, one parallel function for every model, runs on each thread by address).

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
import platform

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
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
        value = _values(context, builder, i64, f64)
        for k, (address, plan_args) in enumerate(steps):
            builder.store(ir.Constant(ir.IntType(64), k), progress)
            status = _call(context, builder, _load(builder, i64, address), plan_args,
                           [value(a) for a in plan_args])
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return types.none(ints, floats, plan), codegen


def _load(builder, base, slot):
    return builder.load(builder.gep(base, [ir.Constant(ir.IntType(64), slot)]))


def _values(context, builder, i64, f64):
    """A function building plan argument `arg`'s value from ints (i64) and floats (f64)."""
    def value(arg):
        kind = arg[0]
        if kind == "a":
            aryty, slot, ndim = arg_type(arg), arg[1], arg[3]
            ary = make_array(aryty)(context, builder)
            item = context.get_data_type(aryty.dtype)
            populate_array(ary, data=builder.inttoptr(_load(builder, i64, slot), item.as_pointer()),
                           shape=[_load(builder, i64, slot + 1 + d) for d in range(ndim)],
                           strides=[_load(builder, i64, slot + 1 + ndim + d) for d in range(ndim)],
                           itemsize=context.get_constant(types.intp, context.get_abi_sizeof(item)),
                           meminfo=None)
            return ary._getvalue()
        if kind == "t":
            return context.make_tuple(builder, arg_type(arg), [value(a) for a in arg[1]])
        if kind == "i":
            return _load(builder, i64, arg[1])
        if kind == "b":
            return builder.icmp_signed("!=", _load(builder, i64, arg[1]), ir.Constant(ir.IntType(64), 0))
        if kind == "f":
            return _load(builder, f64, arg[1])
        return builder.fptrunc(_load(builder, f64, arg[1]), ir.FloatType())
    return value


def _call(context, builder, address, plan_args, values, extra=()):
    """Call the machine code at `address` (numba's calling convention, returning nothing) with
    plan arguments `plan_args` (their built `values`) and then int64 values `extra`; returns its
    status."""
    argtys = [arg_type(a) for a in plan_args] + [types.int64] * len(extra)
    return _call_native(context, builder, address, argtys, list(values) + list(extra))


def _call_native(context, builder, address, argtys, values):
    """Call the machine code at `address` (numba's calling convention, returning nothing) with
    `values` of numba types `argtys`; returns its status."""
    conv = context.call_conv
    fnty = conv.get_function_type(types.none, argtys)
    callee = builder.inttoptr(address, fnty.as_pointer())
    retty = conv.get_return_type(types.none).pointee
    ret = cgutils.alloca_once(builder, retty)
    builder.store(cgutils.get_null_value(retty), ret)
    exc = cgutils.alloca_once(builder, ir.PointerType(excinfo_t), name="excinfo")
    flat = list(conv._get_arg_packer(argtys).as_arguments(builder, values))
    code = builder.call(callee, [ret, exc] + flat)
    return conv._get_return_status(builder, code, builder.load(exc))


def _spin_hint(builder):
    """The CPU's spin-wait hint (x86's pause), where there is one."""
    if platform.machine().lower() in ("x86_64", "amd64", "i686", "x86"):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                            "llvm.x86.sse2.pause")
        builder.call(fn, [])


@intrinsic(prefer_literal=True)
def run_part(typingctx, ints, floats, flags, p, plan):
    """Thread p's share of a parallel chain's literal `plan` (each step (address slot, (argument,
    ...), parts, rows slot)): for each step in turn, claim its parts, own part (p) first, then any
    left unclaimed (a thread the pool did not start, or one late, leaves its part to the others:
    never a wait on a part nobody runs), run each claimed part (rows r0:r1 of ints[rows slot],
    cut as the loop's `_par` driver cuts them; a run-time value, so one chain serves every shape
    of a model; parts 0: the step's own arguments, run once), count it done, then wait until
    every part of the step is done before the next step. flags (int64,
    zeroed before the run): per step its parts' claim slots then its done count; the last slot
    the first failing step's position + 1 (its part counts done: the others never wait forever;
    from then on parts are counted done without running)."""
    if not isinstance(plan, types.StringLiteral):
        return None
    steps = ast.literal_eval(plan.literal_value)

    def codegen(context, builder, sig, args):
        i64, f64, fl = (make_array(t)(context, builder, value=v).data for t, v in zip(sig.args[:3], args[:3]))
        nflags = make_array(sig.args[2])(context, builder, value=args[2]).nitems
        failed = builder.gep(fl, [builder.sub(nflags, ir.Constant(nflags.type, 1))])
        base = 0
        for k, step in enumerate(steps):
            count = max(step[2], 1)
            func = _part_step(context, builder.module, k, step, base)
            builder.call(func, [i64, f64, fl, failed, args[3]])
            base += count + 1
        return context.get_dummy_value()
    return types.none(ints, floats, flags, p, plan), codegen


def _part_step(context, module, k, step, first):
    """Step k of a parallel chain (`step`: (address slot, (argument, ...), parts, rows slot); its
    claim slots from flags[first]) as a function of its own, (ints, floats, flags, failed flag,
    thread) -> nothing: claim and run its parts, then wait for all of them. One function a step,
    not one body for the whole run, and each step's arguments built once for all its parts:
    LLVM's loop passes (LICM above all) grow faster than linearly with the loops and atomics in
    one function (mp_face_detection's chain of 72 steps: 6.9 -> 3.9 s of compiling as a parallel
    function; 1.5 s as the serial body `launch` runs)."""
    i64t = ir.IntType(64)
    ptr = i64t.as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [ptr, ir.DoubleType().as_pointer(), ptr, ptr, i64t])
    func = ir.Function(module, fnty, module.get_unique_name(f"chain_part_step_{k}"))
    func.linkage = "internal"
    func.attributes.add("noinline")
    builder = ir.IRBuilder(func.append_basic_block("entry"))
    i64, f64, fl, failed, me = func.args
    address, plan_args, parts, rows = step
    count = max(parts, 1)
    done = builder.gep(fl, [ir.Constant(i64t, first + count)])
    # the arguments built once, for every part this thread runs
    values = [_values(context, builder, i64, f64)(a) for a in plan_args]
    entry = _load(builder, i64, address)
    rows = _load(builder, i64, rows) if parts else None
    size = builder.sdiv(builder.add(rows, ir.Constant(i64t, count - 1)), ir.Constant(i64t, count)) \
        if parts else None

    def attempt(q):
        slot = builder.gep(fl, [builder.add(ir.Constant(i64t, first), q)])
        _claim_and_run(context, builder, slot, done, failed, k, entry, plan_args, values,
                       parts, rows, size, q)
    if count > 1:   # own part first
        with builder.if_then(builder.icmp_signed("<", me, ir.Constant(i64t, count))):
            attempt(me)
    for q in range(count):   # then whatever is left
        attempt(ir.Constant(i64t, q))
    # wait for every part of this step
    loop, body, out = (builder.append_basic_block() for _ in range(3))
    builder.branch(loop)
    builder.position_at_end(loop)
    finished = builder.load_atomic(done, "acquire", 8)
    builder.cbranch(builder.icmp_signed(">=", finished, ir.Constant(i64t, count)), out, body)
    builder.position_at_end(body)
    _spin_hint(builder)
    builder.branch(loop)
    builder.position_at_end(out)
    builder.ret_void()
    return func


def _claim_and_run(context, builder, slot, done, failed, k, entry, plan_args, values, parts, rows, step, q):
    """If part q's claim slot is still 0, take it, run the part and count it done."""
    i64t = ir.IntType(64)
    zero, one = ir.Constant(i64t, 0), ir.Constant(i64t, 1)
    got = builder.extract_value(builder.cmpxchg(slot, zero, one, "seq_cst", "seq_cst"), 1)
    # after a failure the steps left are only counted done: their inputs may be garbage (an
    # index a gather would follow out of bounds)
    ok = builder.icmp_signed("==", builder.load_atomic(failed, "acquire", 8), zero)
    with builder.if_then(got), builder.if_then(ok):
        if parts:
            r0 = builder.mul(q, step)
            r1 = builder.add(r0, step)
            r0 = builder.select(builder.icmp_signed("<", r0, rows), r0, rows)
            r1 = builder.select(builder.icmp_signed("<", r1, rows), r1, rows)
            status = _call(context, builder, entry, plan_args, values, (r0, r1))
        else:
            status = _call(context, builder, entry, plan_args, values)
        with builder.if_then(status.is_error, likely=False):
            builder.cmpxchg(failed, zero, ir.Constant(i64t, k + 1), "seq_cst", "seq_cst")
    with builder.if_then(got):
        builder.atomic_rmw("add", done, one, "seq_cst")


@intrinsic
def call_part(typingctx, address, ints, floats, flags, p):
    """Call a parallel chain's body (a model's `part(ints, floats, flags, p)`, run_part over its
    plan) at machine code `address`. Its status is not read: run_part records a failing step in
    flags and returns normally."""
    def codegen(context, builder, sig, args):
        _call_native(context, builder, args[0], list(sig.args[1:]), list(args[1:]))
        return context.get_dummy_value()
    return types.none(address, ints, floats, flags, p), codegen


@njit(cache=True, nogil=True, parallel=True)
def launch(address, ints, floats, flags, width):
    """Run a parallel chain: flags zeroed (a plain loop: an array expression would be a parallel
    region more), then `width` threads each run the chain's body at `address` as thread p.
    One function for every chain, compiled once a machine: a model's chain is a serial function
    (its body), which numba compiles in a fraction of the time of a parallel one (a parallel
    function's outlined body is optimized and compiled again in each library that links it:
    mp_face_detection's chain took 7 s as one, ~1 s as a body)."""
    for i in range(flags.shape[0]):
        flags[i] = 0
    for p in prange(width):
        call_part(address, ints, floats, flags, p)


# ---- a chain served ahead of time (mace/ops/fast/_aot.py): no per-model compile ------------------
# The library built ahead holds, for each signature, a trampoline step(ints, floats, bi, bf) that
# loads its arguments from ints[bi:] and floats[bf:] (laid out by _aot.slots) and calls the loop;
# a model's chain is then a table of (trampoline address, bi, bf) rows that `run_table`, one
# function in the library, walks: no code generated per model, so no numba at run time.

@intrinsic(prefer_literal=True)
def array_at(typingctx, ints, at, spec):
    """The array ints[at] (address), ints[at + 1:][:ndim] (shape), then strides describe, typed as
    literal `spec` "dtype ndim layout readonly" says (the type the loop was compiled for)."""
    if not isinstance(spec, types.StringLiteral):
        return None
    dtype, ndim, layout, readonly = spec.literal_value.split()
    arg = ("a", 0, dtype, int(ndim), layout, readonly == "1", True)
    aryty = arg_type(arg)

    def codegen(context, builder, sig, args):
        base = builder.gep(make_array(sig.args[0])(context, builder, value=args[0]).data, [args[1]])
        return _values(context, builder, base, None)(arg)
    return aryty(ints, at, spec), codegen


@intrinsic
def call_step(typingctx, address, ints, floats, bi, bf):
    """Call the trampoline at machine code `address` (numba's calling convention) with (ints,
    floats, bi, bf); an exception it raises propagates."""
    def codegen(context, builder, sig, args):
        status = _call_native(context, builder, args[0], list(sig.args[1:]), list(args[1:]))
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return types.none(address, ints, floats, bi, bf), codegen


@njit(cache=True)
def run_table(table, ints, floats):
    """Run a chain served ahead: row k of `table` is (trampoline address, bi, bf); before each
    step its position goes into the last int slot, so the caller can name the step that failed."""
    last = ints.shape[0] - 1
    for k in range(table.shape[0]):
        ints[last] = k
        call_step(table[k, 0], ints, floats, table[k, 1], table[k, 2])
