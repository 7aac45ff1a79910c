"""Shape a site's link with tc: netem where the kernel has it, else tbf plus userspace delay.

A link profile is a one-way delay, a rate and a loss ratio. A site shapes its own egress, so the
kernel can only delay one direction: netem gets the whole round trip (twice the one-way delay)
on the way out. Where the kernel lacks netem (DESIGN §6), tbf paces the rate and the delay is
left to the site's userspace link proxy (`powertrip.transport.linkproxy`), which delays both
directions by the one-way delay; either way a round trip gains twice the one-way delay. Loss
needs netem and is refused without it.

Every change is one `tc qdisc replace` of the root qdisc, which the kernel applies atomically:
a refused step leaves the interface as it was. netem and tbf get different handles so that
switching between them is one replace too. Only a root qdisc this module added (its handles) is
ever replaced or removed; any other is left alone with an error that says so. Applying the same
profile twice, or clearing twice, is harmless.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from powertrip.errors import InvalidValueError, PowerTripError

NETEM_HANDLE = "5054:"
TBF_HANDLE = "5055:"
OUR_HANDLES = frozenset({NETEM_HANDLE, TBF_HANDLE})
DEFAULT_HANDLE = "0:"  # the kernel's own root qdisc (noqueue, pfifo_fast, fq_codel, mq)
TBF_LATENCY_S = 0.1  # queue that tbf may hold, in time at its rate
TBF_MIN_BURST_BYTES = 32 * 2**10  # room for a GSO segment
UNKNOWN_KIND = "Specified qdisc kind is unknown"


class ShapingError(PowerTripError):
    """A link could not be shaped or cleared; the message says what the interface was left as."""


@dataclass(frozen=True)
class LinkShape:
    """One-way delay, rate (None: unlimited) and loss ratio of a site's link."""

    delay_s: float = 0.0
    rate_bits_per_s: float | None = None
    loss_ratio: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.delay_s) and self.delay_s >= 0):
            raise InvalidValueError(f"link delay must be >= 0 ms, got {self.delay_s * 1e3:g} ms")
        rate = self.rate_bits_per_s
        if rate is not None and not (math.isfinite(rate) and rate >= 8_000):
            raise InvalidValueError(f"link rate must be >= 0.008 Mbit/s, got {rate / 1e6:g} Mbit/s")
        if not (math.isfinite(self.loss_ratio) and 0 <= self.loss_ratio < 1):
            raise InvalidValueError(
                f"link loss must be in [0, 100) percent, got {self.loss_ratio * 100:g}%"
            )

    @classmethod
    def from_units(
        cls, delay_ms: float = 0.0, rate_mbit: float | None = None, loss_percent: float = 0.0
    ) -> LinkShape:
        """A profile from the units people write: milliseconds, Mbit/s and percent."""
        rate = None if rate_mbit is None else rate_mbit * 1e6
        return cls(delay_ms / 1e3, rate, loss_percent / 100)

    @property
    def is_unshaped(self) -> bool:
        """True when the profile asks for nothing (no delay, no rate limit, no loss)."""
        return self.delay_s == 0 and self.rate_bits_per_s is None and self.loss_ratio == 0

    def describe(self) -> str:
        """`delay 20 ms, rate 50 Mbit/s, loss 0%` (one-way delay)."""
        rate = "unlimited" if self.rate_bits_per_s is None else f"{self.rate_bits_per_s / 1e6:g}"
        return (
            f"one-way delay {self.delay_s * 1e3:g} ms, rate {rate} Mbit/s, "
            f"loss {self.loss_ratio * 100:g}%"
        )


@dataclass(frozen=True)
class RootQdisc:
    """An interface's root qdisc as `tc -j qdisc show` reports it."""

    kind: str
    handle: str

    @property
    def is_ours(self) -> bool:
        """True when this module added it."""
        return self.handle in OUR_HANDLES

    @property
    def is_default(self) -> bool:
        """True for the kernel's own root qdisc."""
        return self.handle == DEFAULT_HANDLE

    def __str__(self) -> str:
        return f"{self.kind} {self.handle}"


@dataclass(frozen=True)
class Applied:
    """What shaping a link did: the kernel's part and the part left to userspace."""

    device: str
    shape: LinkShape
    qdisc: str  # "netem", "tbf" or "none"

    @property
    def userspace_delay_s(self) -> float:
        """One-way delay the site's link proxy must add in each direction."""
        return 0.0 if self.qdisc == "netem" else self.shape.delay_s

    def describe(self) -> str:
        """A line for the log that says exactly which mechanism does what."""
        wanted = self.shape.describe()
        if self.qdisc == "netem":
            return f"{self.device}: netem applies {wanted} (the round trip's delay on egress)"
        parts = []
        if self.qdisc == "tbf":
            parts.append(f"tbf paces {(self.shape.rate_bits_per_s or 0) / 1e6:g} Mbit/s")
        if self.shape.delay_s:
            parts.append(f"userspace proxy adds {self.shape.delay_s * 1e3:g} ms each way")
        done = ", ".join(parts) or "nothing to shape"
        return f"{self.device}: NO NETEM in this kernel; {done} ({wanted})"


class TcRunner(Protocol):
    """Runs `tc ARGS...` and returns its standard output, or raises ShapingError."""

    def __call__(self, args: Sequence[str]) -> str: ...


@dataclass(frozen=True)
class Tc:
    """Runs the real `tc`, optionally under a command prefix (`ip netns exec NAME`)."""

    prefix: tuple[str, ...] = ()

    def __call__(self, args: Sequence[str]) -> str:
        if not self.prefix and shutil.which("tc") is None:
            raise ShapingError("tc not found: install iproute2")
        command = [*self.prefix, "tc", *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            reason = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
            raise ShapingError(f"`tc {' '.join(args)}` failed: {reason}")
        return done.stdout


def tbf_arguments(rate_bits_per_s: float) -> list[str]:
    """tbf at `rate`: a burst of 4 ms at the rate (at least one GSO segment), 100 ms of queue."""
    burst = max(TBF_MIN_BURST_BYTES, math.ceil(rate_bits_per_s / 8 * 0.004))
    latency_ms = round(TBF_LATENCY_S * 1e3)
    return [
        "tbf",
        "rate",
        f"{round(rate_bits_per_s)}bit",
        "burst",
        str(burst),
        "latency",
        f"{latency_ms}ms",
    ]


def netem_arguments(shape: LinkShape) -> list[str]:
    """netem with the whole round trip's delay, the rate and the loss of `shape`."""
    arguments = ["netem", "delay", f"{round(2 * shape.delay_s * 1e6)}us"]
    if shape.rate_bits_per_s is not None:
        arguments += ["rate", f"{round(shape.rate_bits_per_s)}bit"]
    if shape.loss_ratio:
        arguments += ["loss", f"{shape.loss_ratio * 100:.6g}%"]
    return arguments


class LinkShaper:
    """Applies and clears link profiles on one network interface."""

    def __init__(self, device: str, tc: TcRunner | None = None) -> None:
        if not device or "/" in device or device.strip() != device:
            raise InvalidValueError(f"not a network interface name: {device!r}")
        self.device = device
        self.tc: TcRunner = tc or Tc()

    def root(self) -> RootQdisc:
        """The interface's root qdisc (errors name a missing interface)."""
        output = self.tc(["-j", "qdisc", "show", "dev", self.device, "root"])
        try:
            entries = json.loads(output or "[]")
            entry = next(item for item in entries if item.get("root"))
            return RootQdisc(str(entry["kind"]), str(entry["handle"]))
        except (ValueError, StopIteration, KeyError, TypeError, AttributeError):
            raise ShapingError(
                f"cannot read the root qdisc of {self.device} from tc: {output.strip()!r}"
            ) from None

    def apply(self, shape: LinkShape) -> Applied:
        """Shape the link as `shape` says; on failure the interface is left as it was."""
        before = self._ours_or_default()
        if shape.is_unshaped:
            self._remove(before)
            return Applied(self.device, shape, "none")
        try:
            self._replace(NETEM_HANDLE, netem_arguments(shape))
            return Applied(self.device, shape, "netem")
        except ShapingError as error:
            if UNKNOWN_KIND not in str(error):
                raise self._unchanged(before, error) from None
        if shape.loss_ratio:
            raise ShapingError(
                f"{self.device}: loss of {shape.loss_ratio * 100:g}% needs netem, which this "
                f"kernel lacks; left as it was ({before})"
            )
        if shape.rate_bits_per_s is None:
            self._remove(before)
            return Applied(self.device, shape, "none")
        try:
            self._replace(TBF_HANDLE, tbf_arguments(shape.rate_bits_per_s))
        except ShapingError as error:
            raise self._unchanged(before, error) from None
        return Applied(self.device, shape, "tbf")

    def clear(self) -> bool:
        """Remove this module's shaping; True when there was some. Others' qdiscs stay."""
        before = self._ours_or_default()
        return self._remove(before)

    def _ours_or_default(self) -> RootQdisc:
        root = self.root()
        if not (root.is_ours or root.is_default):
            raise ShapingError(
                f"{self.device} has a root qdisc ({root}) that powertrip did not add; "
                f"left as it was (remove it with `tc qdisc del dev {self.device} root`)"
            )
        return root

    def _replace(self, handle: str, arguments: list[str]) -> None:
        self.tc(["qdisc", "replace", "dev", self.device, "root", "handle", handle, *arguments])

    def _remove(self, before: RootQdisc) -> bool:
        if not before.is_ours:
            return False
        self.tc(["qdisc", "del", "dev", self.device, "root"])
        return True

    def _unchanged(self, before: RootQdisc, error: ShapingError) -> ShapingError:
        """The error of a refused step, saying what the interface was left as (read back)."""
        try:
            now = self.root()
        except ShapingError as unreadable:
            return ShapingError(f"{error}; and then {unreadable}")
        state = f"left as it was ({now})" if now == before else f"now {now}, was {before}"
        return ShapingError(f"{error}; {self.device} {state}")
