"""Benchmark section for placed models: time per placement group and per transfer.

Groups and transfers come from the converted graph (mace/transform/placement/groups.py).
GPU transfers ride on GPU nodes, so while the runs with statistics go, the GPU
runtime logs each upload and download on its own (`GpuRuntime.transfer_log`,
the queue drained around it); a group's time is its ops' time less the
transfers its nodes carried. Where a transfer is an op of its own (the
Quantize/Dequantize at a DSP group's edge), its time is that op's.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from mace.transform.placement.groups import group_of_ops, groups, is_mixed, transfers

CONVERSIONS = ("Quantize", "Dequantize")   # a DSP group's precision transfers


@dataclass
class GroupTiming:
    index: int
    runtime: str
    first: int
    last: int
    ops: int
    avg: float            # ms, compute (its ops less the transfers they carried)
    percent: float        # of groups + transfers


@dataclass
class TransferTiming:
    tensor: str
    src: str
    dst: str
    src_group: int | None     # None: a model input
    dst_group: int | None     # None: a model output
    nbytes: int
    avg: float                # ms
    percent: float


def record(engine):
    """Start logging GPU transfers (returns the log, or None when nothing moves to a GPU)."""
    gpu = getattr(engine, "gpu", None)
    if gpu is None:
        return None
    gpu.transfer_log = defaultdict(list)
    return gpu.transfer_log


def stop(engine) -> None:
    gpu = getattr(engine, "gpu", None)
    if gpu is not None:
        gpu.transfer_log = None


def _mean(values) -> float:
    return statistics.fmean(values) if values else 0.0


def placement_timing(graph, op_avg: dict, log) -> tuple:
    """(GroupTiming list, TransferTiming list); op_avg: op index -> mean ms. Empty unless the
    model runs on more than one runtime."""
    if not is_mixed(graph):
        return [], []
    ops, log = list(graph.net.op), log or {}
    made = {t: i for i, op in enumerate(ops) for t in op.output}
    member = group_of_ops(graph)
    moves, carried = [], defaultdict(float)
    for m in transfers(graph):
        if m.dst == "gpu" or m.src == "gpu":
            key = (m.tensor, "upload" if m.dst == "gpu" else "download")
            avg = _mean(log.get(key, []))
            carried[m.dst_group if m.dst == "gpu" else m.src_group] += avg
        else:   # the Quantize making the tensor, or the Dequantize reading it, is the move
            ends = [made.get(m.tensor)] + [i for i, op in enumerate(ops) if m.tensor in op.input]
            convert = next((i for i in ends if i is not None and ops[i].type in CONVERSIONS), None)
            avg = op_avg.get(convert, 0.0) if convert is not None else 0.0
            if convert is not None:
                carried[member[convert]] += avg
        moves.append([m, avg])
    gs = [[g, max(sum(op_avg.get(i, 0.0) for i in range(g.first, g.last + 1)) - carried[g.index], 0.0)]
          for g in groups(graph)]
    total = sum(a for _, a in gs) + sum(a for _, a in moves) or 1.0
    return ([GroupTiming(g.index, g.runtime, g.first, g.last, g.count, a, 100.0 * a / total) for g, a in gs],
            [TransferTiming(m.tensor, m.src, m.dst, m.src_group, m.dst_group, m.nbytes, a, 100.0 * a / total)
             for m, a in moves])


def placement_lines(result, table, ms) -> list:
    """The section's tables (`table`, `ms`: the benchmark printer's table and number formats)."""
    if not result.groups:
        return []
    lines = table("Stat by Placement Group", ["Group", "Runtime", "Ops", "Count", "Avg(ms)", "%"],
                  [[f"#{g.index}", g.runtime, f"{g.first}-{g.last}", g.ops, ms(g.avg), ms(g.percent)]
                   for g in result.groups]) + [""]
    return lines + table("Stat by Transfer", ["Tensor", "From", "To", "Bytes", "Avg(ms)", "%"],
                         [[t.tensor, "input" if t.src_group is None else f"#{t.src_group} {t.src}",
                           "output" if t.dst_group is None else f"#{t.dst_group} {t.dst}", t.nbytes,
                           ms(t.avg), ms(t.percent)] for t in result.transfers])


__all__ = ["GroupTiming", "TransferTiming", "placement_lines", "placement_timing", "record",
           "stop"]
