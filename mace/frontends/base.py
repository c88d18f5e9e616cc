"""What a frontend is asked to convert, independent of the deployment-file format."""
from __future__ import annotations

from mace.config.specs import TensorSpec, user_to_framework
from mace.ir.dtypes import BY_NAME, to_numpy
from mace.ir.graph import Graph
from mace.proto import pb
from mace.transform.shape_inference import infer_op


FORMAT_ENUM = {"NHWC": pb.NHWC, "NCHW": pb.NCHW, "NONE": pb.DF_NONE}


def add_input_info(graph: Graph, t: TensorSpec) -> None:
    info = graph.net.input_info.add(name=t.name, data_type=BY_NAME[t.dtype],
                                    data_format=FORMAT_ENUM[t.data_format])
    info.dims.extend(t.shape)
    info.minval, info.maxval = float(t.value_range[0]), float(t.value_range[1])
    graph.specs[t.name] = (tuple(t.shape), to_numpy(BY_NAME[t.dtype]))


def add_framework_input(graph: Graph, t: TensorSpec, framework_format: str, unique=None) -> str:
    """Declare model input `t` and return the tensor the framework's ops read: the input itself,
    or a Transpose of it when the caller's layout is not the framework's (named by `unique`,
    default graph.unique_name)."""
    add_input_info(graph, t)
    perm = user_to_framework(t.shape, t.data_format, framework_format)
    if not perm:
        return t.name
    inner = (unique or graph.unique_name)(f"{t.name}_nchw")
    op = graph.add_op("Transpose", [t.name], [inner], name=f"{t.name}_to_nchw", dims=list(perm))
    infer_op(graph, op)
    return inner


def add_output_info(graph: Graph, t: TensorSpec) -> None:
    info = graph.net.output_info.add(name=t.name, data_format=FORMAT_ENUM[t.data_format])
    if t.shape:
        info.dims.extend(t.shape)
