"""Which Debian suite and mirror this host uses, read at run time (never a hard-coded host)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from powertrip.errors import PowerTripError


@dataclass(frozen=True)
class AptSource:
    """A mirror URI and the suite to bootstrap from it."""

    mirror: str
    suite: str

    def line(self) -> str:
        """The one-line sources entry mmdebstrap takes."""
        return f"deb {self.mirror} {self.suite} main"


def host_suite(os_release: Path = Path("/etc/os-release")) -> str:
    """VERSION_CODENAME of /etc/os-release (e.g. bookworm)."""
    try:
        text = os_release.read_text(encoding="utf-8")
    except OSError as error:
        raise PowerTripError(f"cannot read {os_release}: {error.strerror}") from None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "VERSION_CODENAME" and value.strip():
            return shlex.split(value)[0]
    raise PowerTripError(f"{os_release} names no VERSION_CODENAME: not a Debian-like host?")


def _deb822_mirrors(text: str, suite: str) -> list[str]:
    mirrors = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" in fields.get("types", "").split() and suite in fields.get("suites", "").split():
            mirrors += fields.get("uris", "").split()
    return mirrors


def _one_line_mirrors(text: str, suite: str) -> list[str]:
    mirrors = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
            mirrors.append(words[1])
    return mirrors


def host_apt_source(apt_dir: Path = Path("/etc/apt"), suite: str | None = None) -> AptSource:
    """The first mirror this host's apt sources list for its own suite."""
    suite = suite or host_suite()
    files = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        parse = _deb822_mirrors if path.suffix == ".sources" else _one_line_mirrors
        for mirror in parse(text, suite):
            if mirror.startswith(("http://", "https://", "file:/")):
                return AptSource(mirror.rstrip("/"), suite)
    raise PowerTripError(f"no Debian mirror for suite {suite!r} in {apt_dir}/sources.list(.d)")
