"""Commands for messages, written so they work from where the user stands.

Every hint that tells the user to run something is built here: how to run the converter CLI
(`converter_command`), how to install an extra (`install_hint`), this interpreter and its pip.
Where mace is imported from decides: a source checkout (an editable install, or the checkout on
sys.path) gets `pip install -e '.[images]'` and `python tools/converter.py`; an installed wheel
gets `pip install 'mace-converter[images]'` and the `mace-converter` script. Paths are shown
relative to the working directory when they lie below it, and every word is shell-quoted.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path

# The distribution's name (pyproject.toml [project] name): `pymace` on PyPI is an unrelated project.
DISTRIBUTION = "mace-converter"
SCRIPT = "mace-converter"  # the console script ([project.scripts]); the import package stays `mace`

_PACKAGE = Path(__file__).resolve().parents[1]  # the `mace` package folder


def checkout_root() -> Path | None:
    """The source checkout this `mace` is imported from (its pyproject.toml names our
    distribution), or None for an installed wheel."""
    root = _PACKAGE.parent
    try:
        text = (root / "pyproject.toml").read_text()
    except OSError:
        return None
    return root if re.search(rf'^name\s*=\s*"{re.escape(DISTRIBUTION)}"', text, re.M) else None


def shown_path(path, command: bool = False) -> str:
    """`path` as the user types it here: relative when below the working directory (with `./`
    where it is a command, so the shell does not search PATH for it), else absolute."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path)
    if rel.startswith(os.pardir):
        return path
    return f".{os.sep}{rel}" if command and os.sep not in rel else rel


def _on_path(name: str, executable: str) -> bool:
    """Whether typing `name` runs `executable` (found on PATH in the same folder, the same file)."""
    found = shutil.which(name)
    if not found:
        return False
    found, executable = Path(os.path.abspath(found)), Path(os.path.abspath(executable))
    return found.parent == executable.parent and found.exists() and os.path.samefile(found, executable)


def python_command() -> str:
    """How to start this interpreter: `python` when that is what PATH finds, else its path."""
    for name in ("python", "python3"):
        if _on_path(name, sys.executable):
            return name
    return shlex.quote(shown_path(sys.executable, command=True))


def pip_command() -> str:
    """How to run this interpreter's pip: `pip` when PATH finds the one beside it, else `<python> -m pip`."""
    found = shutil.which("pip")
    if found and Path(os.path.abspath(found)).parent == Path(os.path.abspath(sys.executable)).parent:
        return "pip"
    return f"{python_command()} -m pip"


def install_hint(extra: str) -> str:
    """The command that installs the optional extra `extra` (a name in pyproject.toml's
    [project.optional-dependencies]) into this interpreter, for this kind of install."""
    root = checkout_root()
    if root is None:
        return f"{pip_command()} install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    rel = shown_path(root)
    where = rel if os.path.isabs(rel) or rel == os.curdir else f".{os.sep}{rel}"
    return f"{pip_command()} install -e {shlex.quote(f'{where}[{extra}]')}"


def converter_command() -> str:
    """How to run the converter CLI from here: the way this process was started when it is the
    `mace-converter` script, else the checkout's tools/converter.py, else `mace-converter`."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == SCRIPT:
        return SCRIPT if _on_path(SCRIPT, argv0) else shlex.quote(shown_path(argv0, command=True))
    root = checkout_root()
    if root is not None and (root / "tools" / "converter.py").is_file():
        return f"{python_command()} {shlex.quote(shown_path(root / 'tools' / 'converter.py'))}"
    return SCRIPT
