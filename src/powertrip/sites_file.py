"""Read a sites file (YAML or JSON) into a validated `SiteTable`.

Format (every field in the units its name says; see docs/sites-file.md):

    bandwidth_law: {max_bytes_per_s: 1.25e8, knee_km: 1609.344}   # optional
    defaults: {gpus: 8, gpu_power_w: 700}                           # optional, per-site fallback
    sites:
      - site_id: iowa
        distance_km: 120            # or distance_miles
        bandwidth_bytes_per_s: 1e9  # optional: else from the bandwidth law
        gpus: 8
        gpu_power_w: 700
        power_available_ratio: 0.8
        address: 10.0.0.7:50051     # optional: where the aggregator reaches the site's service

Every error names the file and, for a site, its position and id, and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powertrip.errors import InvalidSiteError, InvalidValueError, SitesFileError
from powertrip.model.equations import BandwidthLaw
from powertrip.model.sites import Site, SiteTable
from powertrip.model.units import miles_to_km
from powertrip.yaml_text import parse_yaml

_SITE_FIELDS = {
    "site_id",
    "distance_km",
    "distance_miles",
    "bandwidth_bytes_per_s",
    "gpus",
    "gpu_power_w",
    "power_available_ratio",
    "address",
}
_TOP_LEVEL = {"sites", "defaults", "bandwidth_law"}


def load_sites_file(path: Path) -> SiteTable:
    """Parse and validate a sites file; raise `SitesFileError` naming what is wrong."""
    return load_sites_with_addresses(path)[0]


def load_sites_with_addresses(path: Path) -> tuple[SiteTable, dict[str, str]]:
    """A sites file's sites, and the address (host:port) of every site that names one."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SitesFileError(f"{path}: cannot read the sites file: {error.strerror}") from None
    document = parse_yaml(text, str(path), SitesFileError)
    table = _table(document, str(path))  # every site is valid from here on
    addresses = {}
    for index, entry in enumerate(document["sites"]):
        if "address" not in entry:
            continue
        address = entry["address"]
        if not (isinstance(address, str) and is_host_port(address)):
            raise SitesFileError(
                f"{path}: site #{index} ({table.site_ids[index]!r}): address must be host:port, "
                f"got {address!r}"
            )
        addresses[table.site_ids[index]] = address
    return table, addresses


def is_host_port(address: str) -> bool:
    """Whether `address` has the form host:port."""
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit())


def parse_sites(text: str, source: str = "<sites>") -> SiteTable:
    """Parse sites from YAML (or JSON, a subset of YAML) text."""
    return _table(parse_yaml(text, source, SitesFileError), source)


def _table(document: Any, source: str) -> SiteTable:
    if not isinstance(document, Mapping) or not isinstance(document.get("sites"), list):
        raise SitesFileError(f"{source}: expected a mapping with a 'sites' list")
    unknown = set(document) - _TOP_LEVEL
    if unknown:
        raise SitesFileError(
            f"{source}: unknown top-level key(s) {sorted(unknown)}; valid: {sorted(_TOP_LEVEL)}"
        )
    law = _bandwidth_law(document.get("bandwidth_law") or {}, source)
    defaults = document.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise SitesFileError(f"{source}: 'defaults' must be a mapping of site fields")
    records = [
        _site(index, {**defaults, **entry} if isinstance(entry, Mapping) else entry, law, source)
        for index, entry in enumerate(document["sites"])
    ]
    try:
        return SiteTable.from_sites(records)
    except InvalidSiteError as error:
        raise SitesFileError(f"{source}: {error}") from None


def _bandwidth_law(settings: Any, source: str) -> BandwidthLaw:
    if not isinstance(settings, Mapping):
        raise SitesFileError(f"{source}: 'bandwidth_law' must be a mapping")
    try:
        return BandwidthLaw(**{k: float(v) for k, v in settings.items()})
    except TypeError:
        raise SitesFileError(
            f"{source}: bandwidth_law takes max_bytes_per_s and knee_km, got {sorted(settings)}"
        ) from None
    except (ValueError, InvalidValueError) as error:
        raise SitesFileError(f"{source}: {error}") from None


def _site(index: int, entry: Any, law: BandwidthLaw, source: str) -> Site:
    if not isinstance(entry, Mapping):
        raise SitesFileError(f"{source}: site #{index} must be a mapping of fields")
    where = f"{source}: site #{index} ({entry.get('site_id', 'no site_id')!r})"
    unknown = set(entry) - _SITE_FIELDS
    if unknown:
        raise SitesFileError(f"{where}: unknown field(s) {sorted(unknown)}; valid: "
                             f"{sorted(_SITE_FIELDS)}")  # fmt: skip
    if "site_id" not in entry:
        raise SitesFileError(f"{where}: missing field 'site_id'")
    if ("distance_km" in entry) == ("distance_miles" in entry):
        raise SitesFileError(f"{where}: give exactly one of distance_km or distance_miles")
    distance_field = "distance_km" if "distance_km" in entry else "distance_miles"
    distance_km = _number(entry, distance_field, where)
    if distance_field == "distance_miles":
        distance_km = miles_to_km(distance_km)
    for required in ("gpus", "gpu_power_w", "power_available_ratio"):
        if required not in entry:
            raise SitesFileError(f"{where}: missing field {required!r}")
    bandwidth = (
        _number(entry, "bandwidth_bytes_per_s", where)
        if "bandwidth_bytes_per_s" in entry
        else float(law.bandwidth_bytes_per_s(max(distance_km, 0.0)))
    )
    gpus = _number(entry, "gpus", where)
    if gpus != int(gpus):
        raise SitesFileError(f"{where}: gpus must be a whole number, got {entry['gpus']!r}")
    return Site(
        site_id=str(entry["site_id"]),
        distance_km=distance_km,
        bandwidth_bytes_per_s=bandwidth,
        gpus=int(gpus),
        gpu_power_w=_number(entry, "gpu_power_w", where),
        power_available_ratio=_number(entry, "power_available_ratio", where),
    )


def _number(entry: Mapping[str, Any], field: str, where: str) -> float:
    value = entry[field]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SitesFileError(f"{where}: {field} must be a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise SitesFileError(f"{where}: {field} must be a number, got {value!r}") from None
