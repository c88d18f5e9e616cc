"""A DSP backend plugin used by tests/quantize/test_dsp.py, registered only by the entry point
in pymace_test_dsp-0.1.dist-info/entry_points.txt (this folder goes on sys.path in the test).

It runs the graph as one call (no host engine exposed) with the same int8 kernels, records
every call of the DspBackend interface, and reports a fixed 42 cycles per node, so a test can
tell its numbers from the simulator's.
"""
from mace.runtime.dsp import DspBackend, NodeCost
from mace.runtime.engine import Engine

CALLS = []   # (method, detail) in call order, for the tests


class RecordingBackend(DspBackend):
    name = "test_recorder"
    description = "test plugin: records its calls"

    def load(self, graph, options):
        CALLS.append(("load", graph.net.name))
        self._engine = Engine(graph, device="dsp", options=options)  # private: runs as one call
        self._costs = [NodeCost(i, op.name, op.type, 42, 42e-6) for i, op in enumerate(graph.net.op)]

    def set_inputs(self, inputs):
        CALLS.append(("set_inputs", sorted(inputs)))
        self._inputs = inputs

    def execute(self):
        CALLS.append(("execute", None))
        self._outputs = self._engine.run(self._inputs)

    def get_outputs(self):
        CALLS.append(("get_outputs", sorted(self._outputs)))
        return self._outputs

    def node_costs(self):
        return list(self._costs)


class NotABackend:
    """Registered under the group by mistake: the registry must refuse it by name."""
