"""Mappings the TensorFlow and TFLite frontends share: TFLite's builtin ops are TensorFlow's with
their arguments moved from NodeDef attributes into an options table, so each mapping is written
once here, taking what the two read differently (an axis, a mask, a flag) as arguments. Each
frontend's ops_*.py reads those and registers the op under its own name; what only one framework
has stays there."""
