"""Reading sites files: the format, and errors that name file, site and field."""

from pathlib import Path

import numpy as np
import pytest

from powertrip.errors import SitesFileError
from powertrip.model.units import KM_PER_MILE
from powertrip.sites_file import load_sites_file, load_sites_with_addresses, parse_sites

VALID = """
bandwidth_law: {max_bytes_per_s: 1.0e9, knee_km: 1000}
defaults: {gpus: 8, gpu_power_w: 700}
sites:
  - {site_id: near, distance_km: 500, power_available_ratio: 0.3}
  - {site_id: far, distance_miles: 2000, power_available_ratio: 0.9, gpus: 16}
  - {site_id: fixed, distance_km: 50, bandwidth_bytes_per_s: 2.0e8, power_available_ratio: 1}
"""


def test_valid_file_fills_defaults_law_and_miles(tmp_path: Path) -> None:
    """Defaults apply per site, miles convert to km, missing bandwidth comes from the law."""
    path = tmp_path / "sites.yaml"
    path.write_text(VALID)
    table = load_sites_file(path)
    assert table.site_ids == ("near", "far", "fixed")
    np.testing.assert_allclose(table.distance_km, [500.0, 2000 * KM_PER_MILE, 50.0])
    np.testing.assert_allclose(
        table.bandwidth_bytes_per_s, [1e9, 1e9 * 1000 / (2000 * KM_PER_MILE), 2e8]
    )
    assert table.gpus.tolist() == [8, 16, 8]


def test_json_is_accepted() -> None:
    """JSON, being YAML, reads the same."""
    text = (
        '{"sites": [{"site_id": "a", "distance_km": 1, "gpus": 1, "gpu_power_w": 300,'
        ' "power_available_ratio": 0.5}]}'
    )
    assert parse_sites(text).site_ids == ("a",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sites: [\n  {site_id: a,\n", "line 3"),
        ("- a\n- b\n", "expected a mapping with a 'sites' list"),
        ("sites: []\nextra: 1\n", "unknown top-level key"),
        ("sites: []\n", "empty"),
        ("sites: [7]\n", "site #0 must be a mapping"),
        (
            "sites: [{site_id: a, distance_km: 1, gpus: 1, gpu_power_w: 1, "
            "power_available_ratio: 0.5, colour: red}]",
            "site #0 \\('a'\\): unknown field\\(s\\) \\['colour'\\]",
        ),
        (
            "sites: [{site_id: a, gpus: 1, gpu_power_w: 1, power_available_ratio: 0.5}]",
            "exactly one of distance_km or distance_miles",
        ),
        (
            "sites: [{site_id: a, distance_km: 1, gpu_power_w: 1, power_available_ratio: 0.5}]",
            "missing field 'gpus'",
        ),
        (
            "sites: [{site_id: a, distance_km: far, gpus: 1, gpu_power_w: 1, "
            "power_available_ratio: 0.5}]",
            "distance_km must be a number, got 'far'",
        ),
        (
            "sites: [{site_id: a, distance_km: 1, gpus: 1, gpu_power_w: 1, "
            "power_available_ratio: .nan}]",
            "site 'a' \\(#0\\): power_available_ratio must be in",
        ),
        (
            "sites: [{site_id: a, distance_km: 1, gpus: 1, gpu_power_w: 1, "
            "power_available_ratio: 0.5, bandwidth_bytes_per_s: 0}]",
            "bandwidth_bytes_per_s must be > 0",
        ),
        ("bandwidth_law: {knee_km: -3}\nsites: []\n", "knee_km must be finite and > 0"),
        ("bandwidth_law: {speed: 3}\nsites: []\n", "bandwidth_law takes max_bytes_per_s"),
    ],
)
def test_bad_files_name_what_is_wrong(text: str, message: str) -> None:
    """Syntax errors give the line; bad entries give the site and the field."""
    with pytest.raises(SitesFileError, match=message) as caught:
        parse_sites(text, source="bad.yaml")
    assert str(caught.value).startswith("bad.yaml:")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    """A file that cannot be read is named in the error."""
    with pytest.raises(SitesFileError, match=r"nope\.yaml: cannot read"):
        load_sites_file(tmp_path / "nope.yaml")


def test_addresses_come_with_the_sites_and_bad_ones_are_named(tmp_path: Path) -> None:
    """Sites may name where their service listens; one that is not host:port is an error
    naming the site."""
    path = tmp_path / "sites.yaml"
    path.write_text(
        "defaults: {gpus: 1, gpu_power_w: 300, power_available_ratio: 0.5}\n"
        "sites:\n"
        "  - {site_id: a, distance_km: 10, address: '10.0.0.7:50051'}\n"
        "  - {site_id: b, distance_km: 20}\n"
    )
    table, addresses = load_sites_with_addresses(path)
    assert table.site_ids == ("a", "b")
    assert addresses == {"a": "10.0.0.7:50051"}
    path.write_text(path.read_text().replace("10.0.0.7:50051", "nowhere"))
    with pytest.raises(SitesFileError, match=r"site #0 \('a'\): address must be host:port"):
        load_sites_with_addresses(path)
