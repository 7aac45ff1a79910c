"""The aggregator process's own pieces: the API token file and the job spec's sites order."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from powertrip.aggregator.job import JobSpec
from powertrip.aggregator.main import ApiServerSettings, api_token
from powertrip.errors import PowerTripError


def test_a_token_is_made_once_private_and_kept(tmp_path: Path) -> None:
    """Without --token the first start writes a random token readable by its owner only; the
    next start reads the same one; the settings' repr never shows a given token."""
    settings = ApiServerSettings(profiler="127.0.0.1:1", data_dir=tmp_path)
    token, path = api_token(settings)
    assert path == tmp_path / "api-token"
    assert len(token) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert api_token(settings) == (token, path)
    given = ApiServerSettings(profiler="127.0.0.1:1", data_dir=tmp_path, token="given-secret")
    assert api_token(given) == ("given-secret", None)
    assert "given-secret" not in repr(given)


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    """An empty token file is an error that says how to fix it, not an open API."""
    (tmp_path / "api-token").write_text("\n")
    with pytest.raises(PowerTripError, match="is empty: delete it"):
        api_token(ApiServerSettings(profiler="127.0.0.1:1", data_dir=tmp_path))


def test_the_spec_sends_its_local_training_to_the_sites() -> None:
    """A job's local steps, epochs, batch, learning rate and seed reach every site's order."""
    spec = JobSpec(local_steps=3, local_epochs=1.5, batch_size=8, learning_rate=0.2, seed=4)
    training = spec.training("job-1")
    assert (training.job_id, training.local_steps, training.local_epochs) == ("job-1", 3, 1.5)
    assert (training.batch_size, training.learning_rate, training.seed) == (8, 0.2, 4)
