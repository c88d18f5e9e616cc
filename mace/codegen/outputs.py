"""What `convert` writes besides .pb/.data for code-format and obfuscated models.

Per model, into the convert's scratch folder: the generated modules
(model_graph_format: code) and the obfuscation map (obfuscate: 1); each is
returned with its place under builds/<library>/, where `finish_library` moves it
once every model converted, and writes the package's `__init__.py`.
"""
from __future__ import annotations

import os
from pathlib import Path

from mace.codegen.generate import write_init, write_model_code
from mace.codegen.obfuscate import write_map
from mace.config.files import MAP_SUFFIX, code_dir, module_name, package_name


def model_extras(config, model: str, scratch: Path, pb_path: Path, data_path: Path, mapping) -> list:
    """Write the model's extra files into `scratch`; returns [(file, path relative to the library)]."""
    extras = []
    if mapping is not None:
        path = Path(scratch) / f"{model}{MAP_SUFFIX}"
        write_map(mapping, path)
        extras.append((path, Path("model") / path.name))
    if config.model_graph_format == "code":
        pkg = Path(scratch) / "code" / package_name(config.library_name)
        for f in write_model_code(pb_path, data_path, pkg, config.library_name, model,
                                  config.model_data_format):
            extras.append((f, Path("code") / pkg.name / f.relative_to(pkg)))
    return extras


def finish_library(config, library_dir: Path, results) -> None:
    """Move every model's extras into place; drop files a previous convert left that no longer apply."""
    library_dir = Path(library_dir)
    for r in results:
        for src, rel in r.extra_files:
            dest = library_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)
        moved = {rel for _, rel in r.extra_files}
        stale = [Path("model") / f"{r.model}{MAP_SUFFIX}",
                 Path("model") / f"{r.model}_quantize_report.txt",
                 Path("model") / f"{r.model}_quantize_report.json",
                 Path("code") / package_name(config.library_name) / "_weights" / f"{module_name(r.model)}.py"]
        for rel in stale:
            if rel not in moved and (library_dir / rel).exists():
                (library_dir / rel).unlink()
    if config.model_graph_format == "code":
        write_init(code_dir(library_dir, config.library_name), config.library_name, config.models,
                   config.model_data_format)
