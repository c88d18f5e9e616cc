"""validation_inputs_data / validation_outputs_data as URLs (MACE's own example names one), served
by a local HTTP server on 127.0.0.1: downloaded once into builds/downloads, checked against
validation_inputs_data_sha256_checksum as model files are against model_sha256_checksum."""
from __future__ import annotations

import numpy as np
import pytest

from mace.config import load_deployment
from mace.config.files import data_file, make_inputs
from mace.errors import ChecksumError, ConfigError
from tests.cli_helpers import DIGITS, cli, digits_model, sha256, workdir, write_deployment
from tests.config.test_fetch import no_proxy, server  # noqa: F401 - fixtures

IMAGE = DIGITS / "inputs" / "image_0.npy"


def _deploy(work, **sg):
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(**sg)})
    return load_deployment(work / "deploy.yml")


@pytest.fixture
def work(tmp_path):
    return workdir(tmp_path)


def test_url_input_downloads_once_and_matches_the_file(work, server):
    base, www, requests = server
    (www / "dog.npy").write_bytes(IMAGE.read_bytes())
    config = _deploy(work, validation_inputs_data=[f"{base}/dog.npy"],
                     validation_inputs_data_sha256_checksum=[sha256(IMAGE)])
    sg = config.models["digits_cnn"].graph
    inputs, source = make_inputs(config, sg, None, build_dir=work / "builds")
    assert source == "validation_inputs_data"
    np.testing.assert_array_equal(inputs["image"], np.load(IMAGE))
    cached = list((work / "builds" / "downloads").glob("*.npy"))
    assert len(cached) == 1 and requests == ["/dog.npy"]
    make_inputs(config, sg, None, build_dir=work / "builds")
    assert requests == ["/dog.npy"]   # the checksum matched: no second download


def test_url_without_checksum_says_which_key_and_the_sha(work, server):
    base, www, _ = server
    (www / "dog.npy").write_bytes(IMAGE.read_bytes())
    config = _deploy(work, validation_inputs_data=[f"{base}/dog.npy"])
    with pytest.raises(ConfigError) as e:
        make_inputs(config, config.models["digits_cnn"].graph, None, build_dir=work / "builds")
    assert "validation_inputs_data_sha256_checksum[0]: required" in str(e.value)
    assert sha256(IMAGE) in str(e.value)


def test_wrong_checksum_is_refused_and_not_kept(work, server):
    base, www, _ = server
    (www / "dog.npy").write_bytes(IMAGE.read_bytes())
    config = _deploy(work, validation_inputs_data=[f"{base}/dog.npy"],
                     validation_inputs_data_sha256_checksum=["0" * 64])
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        make_inputs(config, config.models["digits_cnn"].graph, None, build_dir=work / "builds")
    assert not list((work / "builds" / "downloads").glob("*.npy"))


def test_checksum_list_must_match_the_files(work):
    with pytest.raises(ConfigError, match="validation_inputs_data_sha256_checksum: has 2 entries"):
        _deploy(work, validation_inputs_data_sha256_checksum=["a" * 64, "b" * 64])


def test_local_file_with_a_checksum_is_checked(work):
    config = _deploy(work, validation_inputs_data_sha256_checksum=["f" * 64])
    with pytest.raises(ChecksumError):
        data_file(config, config.models["digits_cnn"].graph, "validation_inputs_data", 0)


def test_run_validate_with_url_inputs_and_outputs_through_the_cli(work, server):
    base, www, requests = server
    (www / "in.npy").write_bytes(IMAGE.read_bytes())
    ok = cli("run", "--config=deploy.yml", "--output_dir=expected", cwd=_converted(work))
    assert ok.returncode == 0, ok.stderr
    (www / "out.npy").write_bytes((work / "expected" / "prob.npy").read_bytes())
    _deploy(work, validation_inputs_data=[f"{base}/in.npy"],
            validation_inputs_data_sha256_checksum=[sha256(IMAGE)],
            validation_outputs_data=[f"{base}/out.npy"],
            validation_outputs_data_sha256_checksum=[sha256(www / "out.npy")])
    r = cli("run", "--config=deploy.yml", "--validate", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Similarity test passed" in r.stdout and "inputs from validation_inputs_data" in r.stdout
    assert sorted(requests) == ["/in.npy", "/out.npy"]


def _converted(work):
    r = cli("convert", "--config=deploy.yml", cwd=work)
    assert r.returncode == 0, r.stderr
    return work
