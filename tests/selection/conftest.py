"""Shared site tables for the selection tests."""

import numpy as np
import pytest

from powertrip.model.sites import SiteTable
from support import law_table


@pytest.fixture
def trade_off_sites() -> SiteTable:
    """Near but weak, far but strong, and a balanced site between them.

    At 1.5 GB: lowest latency picks `near-weak`, highest power `far-strong`, and Eq.8 picks
    `mid-balanced` (score 0.38 against 0 for the other two).
    """
    return law_table(
        ["near-weak", "far-strong", "mid-balanced"], [100.0, 9000.0, 1500.0], [0.15, 1.0, 0.8]
    )


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator."""
    return np.random.default_rng(7)
