"""Mapping between the IR's DataType enum and numpy dtypes."""
import numpy as np

from mace.proto import pb

_TO_NUMPY = {
    pb.DT_FLOAT: np.float32,
    pb.DT_HALF: np.float16,
    pb.DT_FLOAT16: np.float16,
    pb.DT_UINT8: np.uint8,
    pb.DT_INT8: np.int8,
    pb.DT_INT16: np.int16,
    pb.DT_UINT16: np.uint16,
    pb.DT_INT32: np.int32,
    pb.DT_UINT32: np.uint32,
    pb.DT_INT64: np.int64,
    pb.DT_BOOL: np.bool_,
}
_FROM_NUMPY = {np.dtype(v): k for k, v in reversed(list(_TO_NUMPY.items()))}
_FROM_NUMPY[np.dtype(np.float64)] = pb.DT_FLOAT  # converted models never keep f64

# Names users write in input_data_types / output_data_types.
BY_NAME = {
    "float32": pb.DT_FLOAT, "float16": pb.DT_HALF, "int32": pb.DT_INT32,
    "uint8": pb.DT_UINT8, "int16": pb.DT_INT16, "int64": pb.DT_INT64,
    "bfloat16": pb.DT_BFLOAT16, "bool": pb.DT_BOOL, "int8": pb.DT_INT8,
}


def to_numpy(dt: int) -> np.dtype:
    try:
        return np.dtype(_TO_NUMPY[dt])
    except KeyError:
        raise ValueError(f"no numpy dtype for IR data type {pb.DataType.Name(dt)}") from None


def from_numpy(dtype) -> int:
    try:
        return _FROM_NUMPY[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"numpy dtype {np.dtype(dtype)} has no IR data type") from None
