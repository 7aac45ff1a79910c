"""The distribution's layout: one namespace package over the core and the three services."""

from pathlib import Path

import powertrip

ROOT = Path(__file__).resolve().parent.parent


def test_namespace_package_spans_core_and_service_roots() -> None:
    """`powertrip.__path__` covers src/ and every services/* root (DESIGN §5)."""
    paths = {Path(p).resolve() for p in powertrip.__path__}
    expected = {
        ROOT / "src" / "powertrip",
        ROOT / "services" / "aggregator" / "powertrip",
        ROOT / "services" / "site" / "powertrip",
        ROOT / "services" / "profiler" / "powertrip",
    }
    assert expected <= paths


def test_no_module_shadows_the_standard_site_module() -> None:
    """No root of the distribution holds a top-level `site` module or package."""
    roots = [ROOT / "src", *(ROOT / "services").iterdir()]
    for root in roots:
        assert not (root / "site.py").exists()
        assert not (root / "site").exists()
