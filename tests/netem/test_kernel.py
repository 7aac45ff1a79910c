"""Link shaping on real interfaces, in network namespaces this test makes and removes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from netns import NamespacePair, namespace_pair
from powertrip.netem import LinkShape, LinkShaper, RootQdisc, ShapingError


@pytest.fixture
def pair() -> Iterator[NamespacePair]:
    with namespace_pair() as made:
        yield made


def test_shaped_rate_is_achieved_and_clear_restores_the_default(pair: NamespacePair) -> None:
    shaper = LinkShaper(pair.left_device, pair.tc())
    before = shaper.root()
    applied = shaper.apply(LinkShape.from_units(delay_ms=5, rate_mbit=20))
    if applied.qdisc == "netem":
        assert shaper.root().kind == "netem"
    else:  # this kernel (DESIGN §6): tbf paces, the delay is the site proxy's
        assert applied.qdisc == "tbf"
        assert applied.userspace_delay_s == pytest.approx(0.005)
        assert shaper.root() == RootQdisc("tbf", "5055:")
    achieved = pair.bits_per_s_left_to_right(6 * 2**20)
    assert achieved == pytest.approx(20e6, rel=0.15)

    assert shaper.apply(LinkShape.from_units(delay_ms=5, rate_mbit=20)) == applied  # idempotent
    assert shaper.clear() is True
    assert shaper.root() == before
    assert shaper.clear() is False
    assert pair.bits_per_s_left_to_right(6 * 2**20) > 100e6  # unshaped again


def test_a_missing_interface_is_named(pair: NamespacePair) -> None:
    with pytest.raises(ShapingError, match='Cannot find device "nope0"'):
        LinkShaper("nope0", pair.tc()).apply(LinkShape.from_units(rate_mbit=10))


def test_a_refused_step_leaves_the_interface_as_it_was(pair: NamespacePair) -> None:
    shaper = LinkShaper(pair.left_device, pair.tc())
    shaper.apply(LinkShape.from_units(rate_mbit=10))
    before = shaper.root()
    # A rate tc accepts as a number but the kernel cannot pace (over 2^64 bit/s).
    with pytest.raises(ShapingError, match=r"left as it was \(tbf 5055:\)|left as it was \(netem"):
        shaper.apply(LinkShape(rate_bits_per_s=1e30))
    assert shaper.root() == before


def test_another_tools_qdisc_is_left_alone(pair: NamespacePair) -> None:
    tc = pair.tc()
    tc(["qdisc", "add", "dev", pair.left_device, "root", "handle", "1:", "htb"])
    with pytest.raises(ShapingError, match=r"\(htb 1:\) that powertrip did not add"):
        LinkShaper(pair.left_device, tc).apply(LinkShape.from_units(rate_mbit=10))
    assert LinkShaper(pair.left_device, tc).root() == RootQdisc("htb", "1:")
