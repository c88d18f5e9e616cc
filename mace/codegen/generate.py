"""Render a converted model (.pb + .data) as an importable Python package.

builds/<library>/code/<library>_models/
    __init__.py          create_engine_from_code(model_name, ...), MODELS
    <model>.py           the graph: protobuf constructor calls, one per op
    _weights/<model>.py  the weights as one base64 literal (model_data_format: code)

The graph is written from the saved .pb, so it is the file model exactly (checked
after rendering). Output is deterministic: fields in field-number order, ops in
execution order, model lists sorted, no dates or paths.
"""
from __future__ import annotations

import base64
import hashlib
import math
from pathlib import Path

import jinja2
from google.protobuf.descriptor import FieldDescriptor

from mace.config.files import module_name, package_name
from mace.ir.model_io import load_net
from mace.proto import pb

LINE = 100          # a message longer than this is written one field per line
B64_LINE = 76       # base64 characters per line of a weights module


class Code(str):
    """Python source made here (a repr, a rendered message): the only text a template may hold."""


def _py(value) -> Code:
    """The `py` filter: a value as a Python literal (names, whatever they hold, stay data)."""
    if isinstance(value, jinja2.Undefined):  # repr() would print it: a template typo fails instead
        raise jinja2.UndefinedError(f"{value._undefined_name!r} is undefined")
    return Code(repr(value))


def _identifier(name: str) -> Code:
    """A Python identifier for source text (a package name), checked: never anything else."""
    if not (name.isascii() and name.isidentifier()):
        raise ValueError(f"{name!r} is not a Python identifier")
    return Code(name)


def _finalize(value):
    """Every `{{ ... }}` goes through here: source made here and numbers pass, any other text
    (a name from a deployment file or a model) is refused, so nothing is ever pasted into code."""
    if isinstance(value, Code) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"refusing to paste {type(value).__name__} {value!r} into generated code: "
                    f"use the `py` filter")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("mace.codegen", "templates"),
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
                             finalize=_finalize, autoescape=False)
    env.filters["py"] = _py
    return env


# ---- protobuf messages as Python source ------------------------------------------
def _scalar(field, value) -> str:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return f"pb.{field.enum_type.values_by_number[value].name}"
    if field.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)  # floats: repr of the float32 value round-trips exactly


def _value(field, value, indent: int) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return render_message(value, indent)
    return _scalar(field, value)


def render_message(msg, indent: int = 0) -> str:
    """`pb.Type(field=value, ...)` for the fields that are set, on one line when short."""
    parts = []
    for field, value in msg.ListFields():
        if field.is_repeated:
            items = [_value(field, v, indent + 8) for v in value]
            one = f"[{', '.join(items)}]"
            if len(one) > LINE or "\n" in one:
                pad = " " * (indent + 8)
                one = "[\n" + "".join(f"{pad}{i},\n" for i in items) + " " * (indent + 4) + "]"
            parts.append(f"{field.name}={one}")
        else:
            parts.append(f"{field.name}={_value(field, value, indent + 4)}")
    head = f"pb.{type(msg).__name__}("
    one = head + ", ".join(parts) + ")"
    if len(one) + indent <= LINE and "\n" not in one:
        return Code(one)
    pad = " " * (indent + 4)
    return Code(head + "\n" + "".join(f"{pad}{p},\n" for p in parts) + " " * indent + ")")


# ---- modules ---------------------------------------------------------------------
def render_graph(net: pb.NetDef, library: str, model: str, weights: str) -> str:
    head = pb.NetDef()
    head.CopyFrom(net)
    for name in ("op", "tensors", "input_info", "output_info"):
        head.ClearField(name)
    text = _env().get_template("graph.py.jinja2").render(
        library=library, model=model, weights=weights, embedded=weights == "code",
        data_file=f"{model}.data", data_size=net.data_size,
        net_head=render_message(head),
        inputs=[render_message(i, 4) for i in net.input_info],
        outputs=[render_message(o, 4) for o in net.output_info],
        tensors=[render_message(t, 4) for t in net.tensors],
        ops=[render_message(op, 4) for op in net.op])
    _check_round_trip(text, net, model)
    return text


def _check_round_trip(text: str, net: pb.NetDef, model: str) -> None:
    """The generated graph must rebuild the .pb exactly: a field the renderer got wrong fails here."""
    scope = {}
    exec(compile(text, f"<generated {model}.py>", "exec"), scope)
    rebuilt = scope["build_net"]()
    if rebuilt.SerializeToString(deterministic=True) != net.SerializeToString(deterministic=True):
        raise AssertionError(f"generated code for model '{model}' does not rebuild its graph")


def render_weights(data: bytes, library: str, model: str) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return _env().get_template("weights.py.jinja2").render(
        library=library, model=model, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
        lines=[Code(b64[i:i + B64_LINE]) for i in range(0, len(b64), B64_LINE)])  # base64: [A-Za-z0-9+/=]


def render_init(library: str, models) -> str:
    return _env().get_template("package_init.py.jinja2").render(
        library=library, package=_identifier(package_name(library)),
        models=[(m, _identifier(module_name(m))) for m in sorted(models)])


def write_model_code(pb_path: Path, data_path: Path, out_dir: Path, library: str, model: str,
                     weights: str) -> list:
    """Write the model's module(s) under out_dir (the package folder); returns the paths written."""
    net = load_net(pb_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    module = module_name(model)
    graph_file = out_dir / f"{module}.py"
    graph_file.write_text(render_graph(net, library, model, weights))
    written = [graph_file]
    if weights == "code":
        wdir = out_dir / "_weights"
        wdir.mkdir(exist_ok=True)
        (wdir / f"{module}.py").write_text(render_weights(Path(data_path).read_bytes(), library, model))
        written.append(wdir / f"{module}.py")
    return written


def write_init(out_dir: Path, library: str, models, weights: str) -> None:
    """The package's __init__.py (every model of the library) and, for embedded weights, _weights/'s."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "__init__.py").write_text(render_init(library, models))
    if weights == "code":
        (out_dir / "_weights").mkdir(exist_ok=True)
        (out_dir / "_weights" / "__init__.py").write_text('"""Generated weights modules, one per model."""\n')
