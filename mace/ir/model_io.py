"""Write a Graph to `<name>.pb` + `<name>.data`, and load it back without copying weights.

The `.data` file is every constant tensor, each starting at a multiple of
ALIGN bytes; `ConstTensor.offset/data_size` locate it. Loading memory-maps the
file, so weights are paged in on demand and never copied twice.
Writes go to temporary files renamed into place, so a failed write leaves any
previous model intact.
"""
from __future__ import annotations

import mmap

from pathlib import Path

import numpy as np

from mace import __version__
from mace.errors import ModelError
from mace.ir.checks import check_net
from mace.ir.dtypes import from_numpy, to_numpy
from mace.ir.graph import Graph
from mace.ir.quant_params import QuantParams
from mace.proto import pb
from mace.util.aligned import ALIGN
from mace.util.atomic import atomic_write



def save_model(graph: Graph, pb_path: Path, data_path: Path) -> None:
    """Serialize `graph` (net + consts) atomically to pb_path and data_path."""
    net = pb.NetDef()
    net.CopyFrom(graph.net)
    del net.tensors[:]
    net.version = __version__
    blobs, offset = [], 0
    for name, value in graph.consts.items():
        value = np.asarray(value, order="C")  # keeps 0-d scalars 0-d (no dims in the .pb)
        data_type = from_numpy(value.dtype)
        # The bytes must be what the tag says: a float64 constant (TF/Caffe weights, folded
        # numpy math) is tagged DT_FLOAT, so it is written as float32, never as 8-byte values.
        value = np.asarray(value, dtype=to_numpy(data_type), order="C")   # not ascontiguousarray: 0-d stays 0-d
        t = net.tensors.add(name=name, data_type=data_type,
                            offset=offset, data_size=value.nbytes)
        t.dims.extend(value.shape)
        if name in graph.quant:
            _write_quant(t, graph.quant[name])
        pad = (-value.nbytes) % ALIGN
        blobs.append((value, pad))
        offset += value.nbytes + pad
    net.data_size = offset
    atomic_write(Path(data_path), lambda f: _write_blobs(f, blobs))
    atomic_write(Path(pb_path), lambda f: f.write(net.SerializeToString()))


def _write_blobs(f, blobs) -> None:
    for value, pad in blobs:
        f.write(value.tobytes())
        f.write(b"\0" * pad)


def load_net(pb_path: Path) -> pb.NetDef:
    net = pb.NetDef()
    try:
        net.ParseFromString(Path(pb_path).read_bytes())
    except OSError as e:
        raise ModelError(f"{pb_path}: cannot read model graph ({e.strerror})") from None
    except Exception as e:  # protobuf's DecodeError and friends
        raise ModelError(f"{pb_path}: not a valid model graph file ({e})") from None
    return net


def load_model(pb_path: Path, data_path: Path | None = None) -> Graph:
    """Load a converted model; constants are read-only views into a memmap of .data."""
    pb_path = Path(pb_path)
    data_path = Path(data_path) if data_path else pb_path.with_suffix(".data")
    net = load_net(pb_path)
    if net.tensors:
        consts = _map_consts(net, data_path, pb_path)
    else:
        check_net(net, net.data_size, pb_path)
        consts = {}
    return graph_from_net(net, consts)


def graph_from_net(net: pb.NetDef, consts: dict) -> Graph:
    """A Graph over a loaded NetDef and its constants (moves net.tensors' metadata out)."""
    quant = {t.name: _read_quant(t) for t in net.tensors if t.quantized}
    del net.tensors[:]
    graph = Graph(net=net, consts=consts, quant=quant)
    for info in net.input_info:
        graph.specs[info.name] = (tuple(info.dims), to_numpy(info.data_type))
    for op in net.op:
        for t, shape, dt in zip(op.output, op.output_shape, op.output_type):
            graph.specs[t] = (tuple(shape.dims), to_numpy(dt))
    return graph


def _map_consts(net: pb.NetDef, data_path: Path, pb_path: Path) -> dict:
    if not data_path.exists():
        raise ModelError(f"{data_path}: model data file is missing")
    size = data_path.stat().st_size
    check_net(net, size, pb_path)   # before anything is sliced or allocated from it
    blob = np.memmap(data_path, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
    consts = {}
    for t in net.tensors:
        dtype = to_numpy(t.data_type)
        raw = blob[t.offset:t.offset + t.data_size]
        consts[t.name] = raw.view(dtype).reshape(tuple(t.dims))
    return consts


def release_weight_pages(consts: dict) -> int:
    """Let the OS drop the weights file's pages from this process's resident set; returns how many
    mappings were released. Kernels that packed a weight at bind (the GEMM panels) never read the
    mapped copy again, yet its pages stayed resident: counted twice. The mapping is read-only and
    file-backed, so a page a kernel does read again is faulted back in from the page cache,
    unchanged (MADV_DONTNEED on such a mapping drops nothing but residency)."""
    maps = {id(m): m for m in (getattr(v, "_mmap", None) for v in consts.values()) if m is not None}
    released = 0
    for m in maps.values():
        try:
            m.madvise(mmap.MADV_DONTNEED)
            released += 1
        except (AttributeError, OSError, ValueError):   # no madvise on this OS, or a closed map
            pass
    return released


def _write_quant(t, p) -> None:
    t.quantized = True
    t.minval, t.maxval = p.minval, p.maxval
    if p.per_channel:
        t.scales.extend(np.asarray(p.scale, np.float32).tolist())
        t.zero_points.extend(np.asarray(p.zero_point, np.int32).tolist())
        t.quantized_dimension = p.axis
    else:
        t.scale, t.zero_point = p.scale, int(p.zero_point)


def _read_quant(t):
    dtype = to_numpy(t.data_type)
    if t.HasField("quantized_dimension"):
        return QuantParams(np.asarray(t.scales, np.float32), np.asarray(t.zero_points, np.int32),
                           t.minval, t.maxval, dtype, t.quantized_dimension)
    return QuantParams(float(np.float32(t.scale)), int(t.zero_point), t.minval, t.maxval, dtype)


def net_to_text(net: pb.NetDef) -> str:
    """Readable text form of a NetDef (used by --dump_passes and pb_txt files)."""
    from google.protobuf import text_format

    return text_format.MessageToString(net)
