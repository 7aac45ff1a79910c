"""Reading this host's Debian suite and mirror from os-release and apt's sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from powertrip.deploy.debian import AptSource, host_apt_source, host_suite
from powertrip.errors import PowerTripError

DEB822 = """\
Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
Components: main

Types: deb
# a comment
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def apt_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "apt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "apt" / "sources.list.d").mkdir(parents=True, exist_ok=True)
    return tmp_path / "apt"


def test_suite_from_os_release(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 12"\nVERSION_CODENAME=bookworm\n')
    assert host_suite(release) == "bookworm"
    release.write_text("ID=debian\n")
    with pytest.raises(PowerTripError, match="names no VERSION_CODENAME"):
        host_suite(release)


def test_deb822_source_for_the_suite(tmp_path: Path) -> None:
    apt = apt_tree(tmp_path, {"sources.list.d/debian.sources": DEB822})
    source = host_apt_source(apt, "bookworm")
    assert source == AptSource("http://mirror.example/debian", "bookworm")
    assert source.line() == "deb http://mirror.example/debian bookworm main"


def test_one_line_source_with_options(tmp_path: Path) -> None:
    text = "# deb http://old.example/debian bookworm main\n"
    text += "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n"
    apt = apt_tree(tmp_path, {"sources.list": text})
    assert host_apt_source(apt, "bookworm").mirror == "http://one.example/debian"


def test_no_mirror_for_the_suite_is_named(tmp_path: Path) -> None:
    apt = apt_tree(tmp_path, {"sources.list": "deb http://x.example/debian trixie main\n"})
    with pytest.raises(PowerTripError, match="no Debian mirror for suite 'bookworm'"):
        host_apt_source(apt, "bookworm")


def test_this_host_has_a_source() -> None:
    source = host_apt_source()
    assert source.mirror.startswith(("http", "file:"))
