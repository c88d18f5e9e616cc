"""Model as code (`model_graph_format: code`) and obfuscation (`obfuscate: 1`).

`generate.py` renders a converted model (.pb + .data) into a Python package with
the jinja2 templates in `templates/`; `obfuscate.py` renames a graph's internals.
The generated code needs only the runtime: see mace/runtime/from_code.py.
"""
