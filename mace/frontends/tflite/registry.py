"""TFLite builtin op name (BuiltinOperator, e.g. CONV_2D) -> mapping function.
Each ops_*.py module registers with @tfl_op."""
from mace.frontends.mapper_registry import MapperRegistry

_REGISTRY = MapperRegistry("mace.frontends.tflite", "TFLite op")
MAPPERS = _REGISTRY.mappers
tfl_op = _REGISTRY.register
load_mappers = _REGISTRY.load
