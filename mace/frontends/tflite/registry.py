"""TFLite builtin op name (BuiltinOperator, e.g. CONV_2D) or custom op code -> mapping function.
Each ops_*.py module registers with @tfl_op; custom ops also go in CUSTOM_OPS."""
from mace.frontends.mapper_registry import MapperRegistry

_REGISTRY = MapperRegistry("mace.frontends.tflite", "TFLite op")
MAPPERS = _REGISTRY.mappers
tfl_op = _REGISTRY.register
load_mappers = _REGISTRY.load

# custom op codes (e.g. MediaPipe's) with a mapping: they share the table, not the namespace
CUSTOM_OPS = {"Convolution2DTransposeBias", "IRFFT2D", "TFLite_Detection_PostProcess"}
