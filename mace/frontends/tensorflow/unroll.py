"""TF1 `while` loops with a static trip count unrolled, and TensorArrays made plain tensors.

A TF1 loop (tf.compat.v1.while_loop, tf.map_fn: the TensorFlow Object Detection API's batch loops)
is a frame of Enter / Merge / Switch / LoopCond / NextIteration / Exit nodes. A GraphDef -> GraphDef
rewrite, before converting:

- each frame (the nodes between its Enter and Exit nodes, found as TensorFlow finds them: a node is
  in the frame of its inputs, Enter opens a frame, Exit closes it) is copied once per iteration,
  each Merge reading the loop variable's value at that iteration (the Enter's input, then the
  previous copy's NextIteration input), each Exit an Identity of the last values. The loop
  condition of each iteration must be static: computed from constants and input *shapes* only.
  It is evaluated with TensorFlow on inputs of the deployment file's shapes, twice (zeros, then
  random values) and must agree; a Placeholder reached from the condition other than through
  Shape / ShapeN / Size / Rank is refused, naming the loop and the input. Nested loops, a tf.cond
  inside a loop (a Merge that is not a loop variable), and loops running more than MAX_TRIPS times
  are refused. Each iteration's condition costs one TensorFlow run of its ancestors.
- then, in the acyclic graph, TensorArrayV3's elements are followed through its flow tensor:
  Scatter -> one Gather(value, j) per element, Write -> the element, Read -> Identity of the
  element, Gather -> Pack of the elements, Size -> a constant. Sizes and indices must be static in
  the same sense (evaluated together in two runs); a TensorArray that grows (dynamic_size, written
  past its size) is refused. TF2's TensorLists alike, the list's value flowing through its handle:
  FromTensor -> one Gather per row (the row count from the tensor's static shape), Reserve -> a
  list of unwritten elements, SetItem -> the element, GetItem -> Identity, Stack -> Pack, Length ->
  a constant (a tf_keras LSTM's steps: its loop unrolled above).

The result runs in TensorFlow with the same outputs as the original (the tests compare both).
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.frontends.tensorflow.loader import split_tensor, tensor_name

MAX_TRIPS = 1024
LOOP_OPS = {"Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch", "RefSwitch",
            "LoopCond", "NextIteration", "RefNextIteration"}
# TF2's TensorLists (what a Keras 2 / tf_keras LSTM's tf.while_loop keeps its steps in, frozen
# with its loop lowered to the frame above): the list value flows through the handle itself
TL_OPS = {"TensorListReserve", "TensorListFromTensor", "TensorListGetItem", "TensorListSetItem",
          "TensorListStack", "TensorListLength"}
TA_OPS = {"TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3", "TensorArrayWriteV3",
          "TensorArrayGatherV3", "TensorArraySizeV3"} | TL_OPS
_SHAPE_OPS = {"Shape", "ShapeN", "Size", "Rank"}


def needs_unrolling(nodes) -> bool:
    return any(n.op in LOOP_OPS or n.op in TA_OPS for n in nodes)


def _src(t: str) -> str:
    return split_tensor(t.lstrip("^"))[0]


class _Rewriter:
    def __init__(self, tf, graph_def, feeds: dict, path):
        self.tf = tf
        self.path = path
        self.feeds = feeds            # placeholder tensor -> (shape, dtype) for the evaluations
        self.nodes = {}
        for n in graph_def.node:   # copies: the caller's GraphDef stays as it was
            self.nodes[n.name] = type(n)()
            self.nodes[n.name].CopyFrom(n)
        self.order = [n.name for n in graph_def.node]
        self.library = graph_def.library
        self.versions = graph_def.versions

    # ---- graph helpers ------------------------------------------------------------------
    def graph_def(self):
        gd = self.tf.compat.v1.GraphDef()
        gd.versions.CopyFrom(self.versions)
        gd.library.CopyFrom(self.library)
        for name in self.order:
            gd.node.add().CopyFrom(self.nodes[name])
        return gd

    def frame_of(self) -> dict:
        """Node -> frame name ('' outside loops), as TensorFlow's executor assigns them."""
        frame, state = {}, {}
        for root in self.order:
            stack = [(root, False)]
            while stack:
                name, expanded = stack.pop()
                node = self.nodes[name]
                ins = [t for t in node.input if not (node.op in ("Merge", "RefMerge") and
                                                     self.nodes[_src(t)].op in ("NextIteration", "RefNextIteration"))]
                if expanded:
                    parents = {frame[_src(t)] for t in ins} - {""}
                    if node.op in ("Enter", "RefEnter"):
                        if parents:
                            raise ModelError(f"{self.path}: loop '{node.attr['frame_name'].s.decode()}' is nested "
                                             f"in loop '{parents.pop()}': nested while loops are not supported")
                        frame[name] = node.attr["frame_name"].s.decode()
                    elif node.op in ("Exit", "RefExit"):
                        frame[name] = ""
                    elif len(parents) > 1:
                        raise ModelError(f"{self.path}: node '{name}' reads from loops {sorted(parents)}")
                    else:
                        frame[name] = parents.pop() if parents else ""
                    state[name] = 2
                    continue
                if state.get(name):
                    continue
                state[name] = 1
                stack.append((name, True))
                stack.extend((_src(t), False) for t in ins if not state.get(_src(t)))
        return frame

    def static_values(self, tensors: list, what: str) -> list:
        """The tensors' values, which must not depend on the inputs' values: no Placeholder is reached
        except through Shape / ShapeN / Size / Rank, and two runs (zero inputs, random inputs)
        agree, which catches what shapes found at run time (Where, NMS) would change."""
        seen, stack = set(), [_src(t) for t in tensors]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            node = self.nodes[name]
            if node.op in ("Placeholder", "PlaceholderWithDefault"):
                raise ModelError(f"{self.path}: {what} depends on the values of input '{name}': only loops "
                                 f"whose trip count is static (constants, input shapes) can be unrolled")
            if node.op in _SHAPE_OPS:
                continue
            ins = node.input[:1] if node.op == "TensorArraySizeV3" else node.input
            stack.extend(_src(t) for t in ins if not t.startswith("^"))
        first = self.evaluate(tensors, 0)
        second = self.evaluate(tensors, 1)
        for t, a, b in zip(tensors, first, second):
            if np.shape(a) != np.shape(b) or not np.array_equal(a, b):
                raise ModelError(f"{self.path}: {what} ({t}) changes with the inputs' values: only loops "
                                 f"whose trip count is static (constants, input shapes) can be unrolled")
        return first

    def evaluate(self, tensors: list, seed: int = 0) -> list:
        tf = self.tf
        present, stack = set(), [_src(t) for t in tensors]
        while stack:
            name = stack.pop()
            if name not in present:
                present.add(name)
                stack.extend(_src(t) for t in self.nodes[name].input)
        sub = tf.compat.v1.GraphDef()
        sub.versions.CopyFrom(self.versions)
        sub.library.CopyFrom(self.library)
        for name in self.order:
            if name in present:
                sub.node.add().CopyFrom(self.nodes[name])
                sub.node[-1].attr.pop("_class", None)   # colocation with nodes left out
        rng = np.random.default_rng(seed)
        with tf.Graph().as_default() as g:
            tf.compat.v1.import_graph_def(sub, name="")
            fetch = [g.get_tensor_by_name(tensor_name(t)) for t in tensors]
            feeds = [(t, shape, dtype) for t, (shape, dtype) in self.feeds.items() if _src(t) in present]
            feed = lambda values: {g.get_tensor_by_name(t): values(shape).astype(dtype) for t, shape, dtype in feeds}
            with tf.compat.v1.Session(graph=g) as sess:
                if seed == 0:
                    return sess.run(fetch, feed(np.zeros))
                try:
                    return sess.run(fetch, feed(lambda shape: rng.uniform(0, 255, shape)))
                except tf.errors.InvalidArgumentError:
                    # values that only a Shape reads may still be computed on (an Embedding's lookup
                    # before the Shape of its output): ids past its table; random 0s and 1s are ids
                    return sess.run(fetch, feed(lambda shape: rng.integers(0, 2, shape)))

    # ---- loops --------------------------------------------------------------------------
    def unroll(self, f: str, body: list) -> None:
        nodes = self.nodes
        by_op = lambda *ops: [n for n in body if nodes[n].op in ops]
        conds = by_op("LoopCond")
        if len(conds) != 1:
            raise ModelError(f"{self.path}: loop '{f}' has {len(conds)} LoopCond nodes (expected one)")
        merges = by_op("Merge", "RefMerge")
        init, nxt = {}, {}
        for m in merges:
            ins = [t for t in nodes[m].input if not t.startswith("^")]
            kinds = {nodes[_src(t)].op.replace("Ref", ""): t for t in ins}
            if set(kinds) != {"Enter", "NextIteration"}:
                raise ModelError(f"{self.path}: loop '{f}': Merge '{m}' is not a loop variable (a tf.cond inside "
                                 f"a while loop is not supported)")
            init[m] = nodes[_src(kinds["Enter"])].input[0]
            nxt[m] = nodes[_src(kinds["NextIteration"])].input[0]
        switch_of = {s: _src(nodes[s].input[0]) for s in by_op("Switch", "RefSwitch")}
        skip = {"Enter", "RefEnter", "Merge", "RefMerge", "Switch", "RefSwitch", "LoopCond", "NextIteration",
                "RefNextIteration", "Exit", "RefExit"}
        copied = [n for n in body if nodes[n].op not in skip]
        cond_in = nodes[conds[0]].input[0]
        values = {m: init[m] for m in merges}   # merge -> tensor at this iteration
        for k in range(MAX_TRIPS + 1):
            mapping = self._copy_body(f, k, copied, values, switch_of, conds[0])
            cond_t = mapping(cond_in)
            if k == MAX_TRIPS:
                raise ModelError(f"{self.path}: loop '{f}' runs more than {MAX_TRIPS} times: not unrolled")
            (go,) = self.static_values([cond_t], f"the condition of loop '{f}'")
            if not bool(go):
                break
            values = {m: mapping(nxt[m]) for m in merges}
        # drop the last copy (its condition was false) and the frame; the Exits become Identities
        exits = set(by_op("Exit", "RefExit"))
        for n in self._commit_copy:
            del self.nodes[n]
        for e in exits:
            node = nodes[e]
            m = switch_of[_src(node.input[0])]
            node.op = "Identity"
            del node.input[:]
            node.input.append(values[m])
            for key in list(node.attr):
                if key != "T":
                    del node.attr[key]
        for n in body:
            if n not in exits:
                del self.nodes[n]
        self.order = [n for n in self.order if n in self.nodes]

    def _copy_body(self, f, k, copied, values, switch_of, loopcond):
        nodes = self.nodes
        suffix = f"/_unrolled_{k}"

        def mapping(t: str) -> str:
            ctrl = t.startswith("^")
            name, idx = split_tensor(t.lstrip("^"))
            node = nodes.get(name)
            op = node.op.replace("Ref", "") if node is not None else ""
            if op == "Enter":
                out = node.input[0] if node.attr["is_constant"].b else None
                if out is None:
                    raise ModelError(f"{self.path}: loop '{f}': Enter '{name}' read outside a Merge")
            elif op == "Merge":
                if idx != 0:
                    raise ModelError(f"{self.path}: loop '{f}': output {idx} of Merge '{name}' is read")
                out = values[name]
            elif op == "Switch":
                out = values[switch_of[name]]
            elif op == "LoopCond":
                out = mapping(node.input[0])
            elif name in copy_set:
                out = f"{name}{suffix}:{idx}"
            else:
                out = tensor_name(t.lstrip("^"))
            if ctrl:
                return "^" + split_tensor(out.lstrip("^"))[0]
            return out

        copy_set = set(copied)
        made = []
        for n in copied:
            new = nodes[n].__class__()
            new.CopyFrom(nodes[n])
            new.name = n + suffix
            if "_class" in new.attr:   # colocation with the loop's nodes, which go
                del new.attr["_class"]
            del new.input[:]
            seen_ctrl = set()
            for t in nodes[n].input:
                m = mapping(t)
                if m.startswith("^"):
                    if m in seen_ctrl:
                        continue
                    seen_ctrl.add(m)
                new.input.append(m)
            self.nodes[new.name] = new
            made.append(new.name)
        self.order.extend(made)
        self._commit_copy = made
        return mapping

    # ---- TensorArrays -------------------------------------------------------------------
    def topo(self) -> list:
        order, state = [], {}
        for root in self.order:
            stack = [(root, False)]
            while stack:
                name, expanded = stack.pop()
                if expanded:
                    order.append(name)
                    continue
                if state.get(name):
                    continue
                state[name] = 1
                stack.append((name, True))
                stack.extend((_src(t), False) for t in self.nodes[name].input if not state.get(_src(t)))
        return order

    def replace_tensor_arrays(self) -> None:
        nodes = self.nodes
        order = self.topo()
        ta_ops = [n for n in order if nodes[n].op in TA_OPS]
        if not ta_ops:
            return
        static, shapes = [], []
        for n in ta_ops:
            op = nodes[n].op
            if op == "TensorArrayV3":
                static.append(nodes[n].input[0])
            elif op in ("TensorArrayScatterV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3",
                        "TensorListReserve", "TensorListGetItem", "TensorListSetItem"):
                static.append(nodes[n].input[1])
            elif op == "TensorListFromTensor":   # its length: the tensor's rows, from its static shape
                shape = self.tf.compat.v1.NodeDef(name=f"{n}/_rows", op="Shape", input=[nodes[n].input[0]])
                shape.attr["T"].type = nodes[n].attr["element_dtype"].type
                shape.attr["out_type"].type = self.tf.int32.as_datatype_enum
                nodes[shape.name] = shape
                self.order.append(shape.name)
                shapes.append(shape.name)
                static.append(shape.name)
        static = list(dict.fromkeys(tensor_name(t) for t in static))
        try:
            values = dict(zip(static, self.static_values(static, "a TensorArray's size or index"))) if static else {}
        finally:
            for name in shapes:
                del nodes[name]
            self.order = [name for name in self.order if name in nodes]
        idx = lambda t: [int(v) for v in np.asarray(values[tensor_name(t)]).reshape(-1)]
        state = {}      # flow tensor -> list of element tensors (None: not written)
        handles = {}    # handle tensor -> TensorArrayV3 node
        make = self.tf.compat.v1.NodeDef
        enum = lambda dt: self.tf.as_dtype(dt).as_datatype_enum

        def const(name, value):
            value = np.asarray(value)
            n = make(name=name, op="Const")
            n.attr["dtype"].type = enum(value.dtype)
            n.attr["value"].tensor.CopyFrom(self.tf.make_tensor_proto(value))
            nodes[name] = n
            return name

        new_before = {}   # node -> nodes to insert before it
        for n in order:
            node = nodes[n]
            ins = [t for t in node.input if not t.startswith("^")]
            if node.op == "Identity" and ins and tensor_name(ins[0]) in state:
                state[f"{n}:0"] = state[tensor_name(ins[0])]
                continue
            if node.op == "Identity" and ins and tensor_name(ins[0]) in handles:
                handles[f"{n}:0"] = handles[tensor_name(ins[0])]
                continue
            if node.op not in TA_OPS:
                for t in ins:
                    if tensor_name(t) in state or tensor_name(t) in handles:
                        raise ModelError(f"{self.path}: {node.op} '{n}' reads the TensorArray tensor '{t}': "
                                         f"only TensorArray ops may")
                continue
            if node.op == "TensorArrayV3":
                size = idx(ins[0])[0]
                state[f"{n}:1"] = [None] * size
                handles[f"{n}:0"] = n
                continue
            if node.op in TL_OPS:
                made = self._tensor_list(n, node, ins, state, idx, const)
                if made is not None:
                    new_before[n] = made
                continue
            flow_in = tensor_name(ins[-1])
            if flow_in not in state or tensor_name(ins[0]) not in handles:
                raise ModelError(f"{self.path}: {node.op} '{n}': its TensorArray cannot be followed")
            elems = state[flow_in]
            dtype_attr = node.attr["dtype"] if "dtype" in node.attr else node.attr["T"]
            if node.op == "TensorArrayScatterV3":
                elems = list(elems)
                made = []
                picks = idx(ins[1])
                if any(not 0 <= i < len(elems) for i in picks):
                    raise ModelError(f"{self.path}: {node.op} '{n}' scatters to {picks}, outside a TensorArray "
                                     f"of size {len(elems)}")
                for j, i in enumerate(picks):
                    g = make(name=f"{n}/_element_{j}", op="GatherV2", input=[
                        ins[2], const(f"{n}/_element_{j}/index", np.int32(j)),
                        const(f"{n}/_element_{j}/axis", np.int32(0))])
                    g.attr["Tparams"].CopyFrom(node.attr["T"])
                    g.attr["Tindices"].type = enum(np.int32)
                    g.attr["Taxis"].type = enum(np.int32)
                    nodes[g.name] = g
                    made += [f"{n}/_element_{j}/index", f"{n}/_element_{j}/axis", g.name]
                    elems[i] = f"{g.name}:0"
                new_before[n] = made
                state[f"{n}:0"] = elems
                del nodes[n]
            elif node.op == "TensorArrayWriteV3":
                elems = list(elems)
                i = idx(ins[1])[0]
                if not 0 <= i < len(elems):   # a dynamic_size TensorArray growing
                    raise ModelError(f"{self.path}: {node.op} '{n}' writes element {i} of a TensorArray of "
                                     f"size {len(elems)}: growing TensorArrays are not supported")
                elems[i] = tensor_name(ins[2])
                state[f"{n}:0"] = elems
                del nodes[n]
            elif node.op == "TensorArraySizeV3":
                self._replace(n, len(elems))
            else:
                picks = idx(ins[1])
                missing = [i for i in picks if not 0 <= i < len(elems) or elems[i] is None]
                if missing:
                    raise ModelError(f"{self.path}: {node.op} '{n}' reads element(s) {missing} of a TensorArray "
                                     f"that were not written")
                new = make(name=n, op="Identity" if node.op == "TensorArrayReadV3" else "Pack")
                new.input.extend([elems[picks[0]]] if node.op == "TensorArrayReadV3" else [elems[i] for i in picks])
                new.input.extend(t for t in node.input if t.startswith("^"))
                new.attr["T"].CopyFrom(dtype_attr)
                if node.op != "TensorArrayReadV3":
                    new.attr["N"].i = len(picks)
                    new.attr["axis"].i = 0
                nodes[n] = new
        for n in list(nodes):
            if f"{n}:0" in state or f"{n}:0" in handles or nodes[n].op == "TensorArrayV3":
                del nodes[n]
        # control edges on removed nodes are dropped
        for node in nodes.values():
            keep = [t for t in node.input if not (t.startswith("^") and _src(t) not in nodes)]
            del node.input[:]
            node.input.extend(keep)
        new_order = []
        for n in order:
            new_order.extend(new_before.get(n, []))
            if n in nodes:
                new_order.append(n)
        new_order.extend(n for n in nodes if n not in set(new_order))
        self.order = list(dict.fromkeys(new_order))

    def _tensor_list(self, n, node, ins, state, idx, const):
        """One TensorList op made plain tensors (state: list tensor -> its element tensors); the
        nodes made before it (a FromTensor's Gathers), or None."""
        nodes, make = self.nodes, self.tf.compat.v1.NodeDef
        dtype = node.attr["element_dtype"]
        if node.op == "TensorListReserve":
            size = idx(ins[1])[0]
            if size < 0:
                raise ModelError(f"{self.path}: {node.op} '{n}' has no fixed number of elements: "
                                 f"growing TensorLists are not supported")
            state[f"{n}:0"] = [None] * size
            del nodes[n]
            return None
        if node.op == "TensorListFromTensor":
            made, elems = [], []
            for j in range(idx(f"{n}/_rows:0")[0]):
                g = make(name=f"{n}/_element_{j}", op="GatherV2", input=[
                    ins[0], const(f"{n}/_element_{j}/index", np.int32(j)),
                    const(f"{n}/_element_{j}/axis", np.int32(0))])
                g.attr["Tparams"].CopyFrom(dtype)
                g.attr["Tindices"].type = self.tf.int32.as_datatype_enum
                g.attr["Taxis"].type = self.tf.int32.as_datatype_enum
                nodes[g.name] = g
                made += [f"{n}/_element_{j}/index", f"{n}/_element_{j}/axis", g.name]
                elems.append(f"{g.name}:0")
            state[f"{n}:0"] = elems
            del nodes[n]
            return made
        if tensor_name(ins[0]) not in state:
            raise ModelError(f"{self.path}: {node.op} '{n}': its TensorList cannot be followed")
        elems = state[tensor_name(ins[0])]
        if node.op == "TensorListSetItem":
            i = idx(ins[1])[0]
            if not 0 <= i < len(elems):
                raise ModelError(f"{self.path}: {node.op} '{n}' writes element {i} of a TensorList of "
                                 f"{len(elems)}: growing TensorLists are not supported")
            state[f"{n}:0"] = elems[:i] + [tensor_name(ins[2])] + elems[i + 1:]
            del nodes[n]
            return None
        if node.op == "TensorListLength":
            self._replace(n, len(elems))
            return None
        picks = idx(ins[1])[:1] if node.op == "TensorListGetItem" else list(range(len(elems)))
        missing = [i for i in picks if not 0 <= i < len(elems) or elems[i] is None]
        if missing or not picks:
            raise ModelError(f"{self.path}: {node.op} '{n}' reads element(s) {missing or picks} of a "
                             f"TensorList of {len(elems)} that were not written")
        get = node.op == "TensorListGetItem"
        new = make(name=n, op="Identity" if get else "Pack")
        new.input.extend([elems[picks[0]]] if get else [elems[i] for i in picks])
        new.input.extend(t for t in node.input if t.startswith("^"))
        new.attr["T"].CopyFrom(dtype)
        if not get:
            new.attr["N"].i = len(picks)
            new.attr["axis"].i = 0
        nodes[n] = new
        return None

    def _replace(self, name, size):
        node = self.tf.compat.v1.NodeDef(name=name, op="Const")
        node.attr["dtype"].type = self.tf.int32.as_datatype_enum
        node.attr["value"].tensor.CopyFrom(self.tf.make_tensor_proto(np.int32(size)))
        self.nodes[name] = node


def unroll_loops(tf, graph_def, feeds: dict, path, needed: list):
    """graph_def with the loops among `needed` (node names) unrolled and TensorArrays replaced."""
    r = _Rewriter(tf, graph_def, feeds, path)
    r.order = r.topo()   # loops in dependency order: a loop's trip count may depend on an earlier one
    frame = r.frame_of()
    frames = {frame[n] for n in needed if frame.get(n)}
    frames |= {r.nodes[n].attr["frame_name"].s.decode() for n in needed if r.nodes[n].op in ("Enter", "RefEnter")}
    for f in [f for f in dict.fromkeys(frame[n] for n in r.order) if f and f in frames]:
        body = [n for n in r.order if frame.get(n) == f]
        exits = [n for n in r.order if r.nodes[n].op in ("Exit", "RefExit") and
                 frame.get(_src(r.nodes[n].input[0])) == f]
        r.unroll(f, body + [e for e in exits if e not in body])
    r.replace_tensor_arrays()
    for node in r.nodes.values():   # colocation with removed nodes (the TensorArrays) is dropped
        if "_class" in node.attr and any(c.startswith(b"loc:@") and c[5:].decode() not in r.nodes
                                         for c in node.attr["_class"].list.s):
            del node.attr["_class"]
    return r.graph_def()
