"""Every file a command writes under builds/ has the mode the user's umask gives a new file
(0666 less the umask; the runner archive 0777 less it): atomic writes go through a temporary
file, which mkstemp makes 0600, so the .pb, .data and manifests used to be private while the
.pb_txt and .html beside them were not (issue 37, item 7)."""
from __future__ import annotations

import os
import stat

import pytest

from tests.cli_helpers import cli, digits_model, workdir, write_deployment


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_build_outputs_follow_the_umask(tmp_path, umask):
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model()}, target_abis=["host", "arm64"])
    old = os.umask(umask)   # the CLI processes inherit it
    try:
        for args in (("build",), ("run", "--validate_all_layers", "--report"), ("visualize",)):
            r = cli(*args, "--config=deploy.yml", "--build_dir=out", cwd=work)
            assert r.returncode == 0, r.stdout + r.stderr
    finally:
        os.umask(old)
    modes = {p.relative_to(work / "out").as_posix(): stat.S_IMODE(p.stat().st_mode)
             for p in (work / "out").rglob("*") if p.is_file()}
    assert {"digits/model/digits_cnn.pb", "digits/model/digits_cnn.data", "digits/model/digits_cnn.manifest.json",
            "digits/model/digits_cnn.pb_txt", "digits/model/digits_cnn_index.html", "digits/build.json",
            "digits/lib/arm64/cpu/mace_run.pyz", "digits/model/digits_cnn_layers.csv"} <= set(modes)
    want = {name: (0o777 if name.endswith(".pyz") else 0o666) & ~umask for name in modes}
    assert {n: oct(m) for n, m in modes.items()} == {n: oct(m) for n, m in want.items()}
