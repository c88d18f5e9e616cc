"""Caffe layer type -> mapping function. Each ops_*.py module registers with @caffe_layer."""
from mace.frontends.mapper_registry import MapperRegistry

_REGISTRY = MapperRegistry("mace.frontends.caffe", "Caffe layer type")
caffe_layer = _REGISTRY.register
load_mappers = _REGISTRY.load
