"""ONNX op type -> mapping function. Each ops_*.py module registers with @onnx_op."""
from mace.frontends.mapper_registry import MapperRegistry

_REGISTRY = MapperRegistry("mace.frontends.onnx", "ONNX op")
onnx_op = _REGISTRY.register
load_mappers = _REGISTRY.load
