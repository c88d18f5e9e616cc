"""Estimated Hexagon cycles per node: a simple documented model, not a measurement.

The machine assumed is one Hexagon HVX thread in 128-byte vector mode at 1 GHz:

    compute  = ceil(MACs / 128)        Conv2D, DepthwiseConv2d, Deconv2D, FullyConnected, MatMul
             = ceil(work bytes / 128)  every other op: one vector instruction per 128 bytes,
                                       work bytes = max(bytes read, bytes written)
             = 0                       reshape-like ops (Reshape, Identity, Squeeze, ...)
    memory   = ceil(bytes moved / 64)  bytes moved = every input (activations, weights, bias)
                                       + every output, at the dtype the graph stores them in
    dispatch = 1000                    fixed per op (graph executor, thread scheduling)
    cycles   = compute + memory + dispatch;   time = cycles / clock

Why these numbers: HVX's vrmpy multiplies four uint8 pairs per 32-bit lane and adds
them up, 32 lanes a vector: 128 MACs per instruction, one instruction a cycle per
thread. 64 bytes a cycle stands for streaming from L2 into vector registers; the
model does not overlap memory with compute (a pessimistic, easy-to-check bound).
MACs are MACE's benchmark counts (mace/ir/opstats.py count_macs), so the
simulator's and `benchmark`'s MAC columns agree. docs/dsp.md has a worked example.
"""
from __future__ import annotations

from dataclasses import dataclass


from mace.ir.opstats import NO_COMPUTE, count_macs
from mace.runtime.dsp.backend import NodeCost

MAC_OPS = ("Conv2D", "DepthwiseConv2d", "Deconv2D", "FullyConnected", "MatMul")


@dataclass(frozen=True)
class CostModel:
    vector_bytes: int = 128          # HVX vector width (128-byte mode)
    macs_per_cycle: int = 128        # uint8 MACs per cycle per thread (vrmpy on 32 lanes)
    memory_bytes_per_cycle: int = 64
    dispatch_cycles: int = 1000
    clock_hz: float = 1e9

    def estimate(self, index: int, op, graph) -> NodeCost:
        """The NodeCost of one node of `graph` from its shapes and dtypes alone."""
        read = sum(graph.nbytes(t) for t in op.input)
        written = sum(graph.nbytes(t) for t in op.output)
        macs = count_macs(op, graph) if op.type in MAC_OPS else 0
        if op.type in MAC_OPS:
            compute = _ceil_div(macs, self.macs_per_cycle)
        elif op.type in NO_COMPUTE:
            compute = 0
        else:
            compute = _ceil_div(max(read, written), self.vector_bytes)
        memory = _ceil_div(read + written, self.memory_bytes_per_cycle)
        cycles = compute + memory + self.dispatch_cycles
        return NodeCost(index, op.name, op.type, cycles, 1000.0 * cycles / self.clock_hz, macs,
                        read + written, compute, memory, self.dispatch_cycles)


def _ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


