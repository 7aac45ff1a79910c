"""Link shaping against a scripted tc: what is run, what is refused, what is left behind."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from powertrip.errors import InvalidValueError
from powertrip.netem import (
    NETEM_HANDLE,
    TBF_HANDLE,
    LinkShape,
    LinkShaper,
    ShapingError,
    netem_arguments,
    tbf_arguments,
)


class FakeTc:
    """A tc with one root qdisc; netem may be missing and any kind may be made to fail."""

    def __init__(self, netem: bool = True, root: tuple[str, str] = ("noqueue", "0:")) -> None:
        self.netem = netem
        self.root = root
        self.failing: set[str] = set()
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> str:
        args = list(args)
        if args[0] == "-j":
            kind, handle = self.root
            return json.dumps([{"kind": kind, "handle": handle, "root": True, "options": {}}])
        self.calls.append(args)
        verb = args[1]
        if verb == "del":
            self.root = ("noqueue", "0:")
            return ""
        handle, kind = args[6], args[7]
        if kind == "netem" and not self.netem:
            raise ShapingError("`tc ...` failed: Error: Specified qdisc kind is unknown.")
        if kind in self.failing:
            raise ShapingError(f"`tc ...` failed: Error: {kind} refused")
        self.root = (kind, handle)
        return ""


def test_netem_gets_the_round_trip_delay_rate_and_loss() -> None:
    tc = FakeTc()
    applied = LinkShaper("eth0", tc).apply(LinkShape.from_units(20, 50, 1))
    assert applied.qdisc == "netem"
    assert applied.userspace_delay_s == 0
    assert tc.calls == [
        [
            "qdisc",
            "replace",
            "dev",
            "eth0",
            "root",
            "handle",
            NETEM_HANDLE,
            "netem",
            "delay",
            "40000us",
            "rate",
            "50000000bit",
            "loss",
            "1%",
        ]
    ]
    assert "netem applies" in applied.describe()


def test_without_netem_tbf_paces_and_the_delay_goes_to_userspace() -> None:
    tc = FakeTc(netem=False)
    applied = LinkShaper("eth0", tc).apply(LinkShape.from_units(20, 50))
    assert applied.qdisc == "tbf"
    assert applied.userspace_delay_s == pytest.approx(0.02)
    assert tc.root == ("tbf", TBF_HANDLE)
    assert tc.calls[-1][7:] == tbf_arguments(50e6)
    assert "NO NETEM" in applied.describe()
    assert "userspace proxy adds 20 ms" in applied.describe()


def test_without_netem_delay_only_leaves_no_qdisc() -> None:
    tc = FakeTc(netem=False, root=("tbf", TBF_HANDLE))
    applied = LinkShaper("eth0", tc).apply(LinkShape.from_units(5))
    assert applied.qdisc == "none"
    assert applied.userspace_delay_s == pytest.approx(0.005)
    assert tc.root == ("noqueue", "0:")


def test_loss_without_netem_is_refused_and_changes_nothing() -> None:
    tc = FakeTc(netem=False, root=("tbf", TBF_HANDLE))
    with pytest.raises(ShapingError, match=r"loss of 2% needs netem.*left as it was \(tbf 5055:\)"):
        LinkShaper("eth0", tc).apply(LinkShape.from_units(5, 10, 2))
    assert tc.root == ("tbf", TBF_HANDLE)


def test_a_failed_step_says_the_interface_is_as_it_was() -> None:
    tc = FakeTc(netem=False, root=("tbf", TBF_HANDLE))
    tc.failing.add("tbf")
    with pytest.raises(ShapingError, match=r"tbf refused; eth0 left as it was \(tbf 5055:\)"):
        LinkShaper("eth0", tc).apply(LinkShape.from_units(0, 10))
    assert tc.root == ("tbf", TBF_HANDLE)


def test_a_qdisc_powertrip_did_not_add_is_never_touched() -> None:
    tc = FakeTc(root=("htb", "1:"))
    shaper = LinkShaper("eth0", tc)
    with pytest.raises(ShapingError, match=r"root qdisc \(htb 1:\) that powertrip did not add"):
        shaper.apply(LinkShape.from_units(10))
    with pytest.raises(ShapingError, match="did not add"):
        shaper.clear()
    assert tc.calls == []
    assert tc.root == ("htb", "1:")


def test_apply_and_clear_are_idempotent() -> None:
    tc = FakeTc()
    shaper = LinkShaper("eth0", tc)
    shape = LinkShape.from_units(10, 100)
    assert shaper.apply(shape) == shaper.apply(shape)
    assert tc.calls[0] == tc.calls[1]  # replace, never add: the second one changes nothing
    assert shaper.clear() is True
    assert shaper.clear() is False
    assert tc.root == ("noqueue", "0:")
    assert shaper.apply(LinkShape()).qdisc == "none"


@pytest.mark.parametrize(
    ("units", "message"),
    [
        ({"delay_ms": -5}, "delay must be >= 0 ms, got -5 ms"),
        ({"rate_mbit": 0}, "rate must be >= 0.008 Mbit/s, got 0 Mbit/s"),
        ({"rate_mbit": float("nan")}, "rate must be"),
        ({"loss_percent": 100}, r"loss must be in \[0, 100\) percent, got 100%"),
        ({"delay_ms": float("inf")}, "delay must be"),
    ],
)
def test_impossible_profiles_are_refused_before_tc_runs(
    units: dict[str, float], message: str
) -> None:
    with pytest.raises(InvalidValueError, match=message):
        LinkShape.from_units(**units)


@pytest.mark.parametrize("device", ["", "eth0/x", " eth0"])
def test_bad_interface_names_are_refused(device: str) -> None:
    with pytest.raises(InvalidValueError, match="not a network interface name"):
        LinkShaper(device, FakeTc())


def test_unreadable_tc_output_is_named() -> None:
    shaper = LinkShaper("eth0", lambda args: "not json")
    with pytest.raises(ShapingError, match="cannot read the root qdisc of eth0"):
        shaper.root()


def test_arguments() -> None:
    assert netem_arguments(LinkShape(0.0015)) == ["netem", "delay", "3000us"]
    assert tbf_arguments(8e6) == ["tbf", "rate", "8000000bit", "burst", "32768", "latency", "100ms"]
    assert tbf_arguments(1e9)[4] == "500000"
