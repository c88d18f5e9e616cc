"""setup/requirements.txt and setup/optionals.txt must say what pyproject.toml says."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lines(path):
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def test_requirements_match_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert sorted(_lines(ROOT / "setup" / "requirements.txt")) == sorted(project["dependencies"])


def test_optionals_match_pyproject_extras():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    listed, current = {}, None
    for line in (ROOT / "setup" / "optionals.txt").read_text().splitlines():
        m = re.match(r"#\s*extra:\s*(\S+)", line)
        if m:
            current = m.group(1)
        elif line.strip() and not line.startswith("#"):
            listed.setdefault(current, []).append(line.strip())
    expected = {k: v for k, v in extras.items() if k != "all"}
    assert listed == expected


def test_layout_is_as_designed():
    for d in ("tools", "mace", "docker", "setup", "third_party", "docs", "tests", "examples", "benchmarks"):
        assert (ROOT / d).is_dir(), d
    assert "/builds/" in (ROOT / ".gitignore").read_text()
