"""TensorFlow op type -> mapping function. Each ops_*.py module registers with @tf_op."""
from mace.frontends.mapper_registry import MapperRegistry

_REGISTRY = MapperRegistry("mace.frontends.tensorflow", "TensorFlow op")
tf_op = _REGISTRY.register
load_mappers = _REGISTRY.load
