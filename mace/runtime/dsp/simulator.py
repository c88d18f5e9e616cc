"""The default DSP backend, "hexagon_sim": the quantized kernels on the host, plus a cost model.

Execution is an Engine(graph, device="dsp"): only the "int8" kernels of
mace/ops/int8, integer-only and bit-exact, so outputs are byte-identical to a
`quantize: 1` model on the CPU. Ops a convert placed on the CPU (quantize_target_cosine's
float layers) run the CPU's float kernels and get no cycle estimate. Every node also gets an estimated cycle count
from mace/runtime/dsp/cost_model.py (one HVX thread, 128-byte vectors, 1 GHz):

    cycles = ceil(MACs / 128)  (conv, depthwise, deconv, FC, MatMul)
             or ceil(max(bytes read, bytes written) / 128)  (other ops; 0 for reshapes)
           + ceil(bytes moved / 64) + 1000 dispatch

The estimate depends on shapes only, so it is computed once at load; the host
time of the simulation is measured separately by `run` and `benchmark`.
"""
from __future__ import annotations

from mace.ir.args import get_arg
from mace.proto import pb
from mace.runtime.dsp.backend import DspBackend
from mace.runtime.dsp.cost_model import CostModel
from mace.runtime.engine import Engine


class HexagonSimulator(DspBackend):
    name = "hexagon_sim"

    def __init__(self, cost_model: CostModel | None = None):
        self.cost_model = cost_model or CostModel()
        self.engine = None
        self._costs = []
        self._inputs = {}
        self._outputs = {}

    @property
    def description(self) -> str:
        total = sum(c.cycles for c in self._costs)
        clock = self.cost_model.clock_hz / 1e9
        return (f"Hexagon simulator: int8 kernels on the host, estimated {total:,} cycles a run "
                f"({1000.0 * total / self.cost_model.clock_hz:.3f} ms at {clock:g} GHz; docs/dsp.md)")

    def load(self, graph, options: dict) -> None:
        self.engine = Engine(graph, device="dsp", options=options)
        # a model with cpu groups (op_placement): only the ops placed on the DSP cost DSP cycles
        placed = get_arg(graph.net, "op_placement", 0)
        self._costs = [self.cost_model.estimate(i, op, graph) for i, op in enumerate(graph.net.op)
                       if not placed or op.device_type == pb.HEXAGON]

    def set_inputs(self, inputs: dict) -> None:
        self._inputs = inputs  # the engine copies them into its buffers when it runs

    def execute(self) -> None:
        self._outputs = self.engine.run(self._inputs)

    def get_outputs(self) -> dict:
        return self._outputs

    def node_costs(self) -> list:
        return list(self._costs)
