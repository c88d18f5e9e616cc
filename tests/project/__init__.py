"""Project-wide checks: generated docs, packaging metadata, the checked-in protobuf module, the layer contract."""
