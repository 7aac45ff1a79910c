"""FedAvg (Eq.1/2) and the checks every update passes."""

import numpy as np
import pytest

from powertrip.errors import InvalidValueError
from powertrip.fl import InvalidUpdateError, StreamingFedAvg, check_update, fedavg


def test_fedavg_weights_by_sample_count() -> None:
    """(1 x 1 + 4 x 3) / 4 = 3.25; an unweighted mean would give 2.5."""
    assert fedavg([([1.0], 1), ([4.0], 3)]).tolist() == [3.25]


def test_streaming_equals_the_list_average_and_keeps_dtypes() -> None:
    """Folding one update at a time gives the same weighted mean, in the model's dtype."""
    rng = np.random.default_rng(0)
    reference = {"w": np.zeros((3, 2), np.float32), "b": np.zeros(2, np.float32)}
    updates = [
        (
            {
                "w": rng.normal(size=(3, 2)).astype(np.float32),
                "b": rng.normal(size=2).astype(np.float32),
            },
            n,
        )
        for n in (5, 1, 9)
    ]
    average = StreamingFedAvg(reference)
    for update, n in updates:
        average.add(update, n)
    result = average.result()
    assert result["w"].dtype == np.float32
    for name in reference:
        expected = fedavg([(u[name], n) for u, n in updates])
        np.testing.assert_allclose(result[name], expected, rtol=1e-6)


def test_empty_or_bad_weights_are_errors() -> None:
    """No update, or a non-positive sample count, is an error."""
    with pytest.raises(InvalidValueError):
        fedavg([])
    with pytest.raises(InvalidValueError):
        StreamingFedAvg({"w": np.zeros(1)}).result()
    with pytest.raises(InvalidValueError, match="sample count"):
        StreamingFedAvg({"w": np.zeros(1)}).add({"w": np.zeros(1)}, 0)


REFERENCE = {"w": np.zeros((2, 2), np.float32), "b": np.zeros(2, np.float32)}


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"w": np.zeros((2, 2), np.float32)}, "missing \\['b'\\]"),
        ({**REFERENCE, "extra": np.zeros(1, np.float32)}, "unexpected \\['extra'\\]"),
        ({**REFERENCE, "w": np.zeros((2, 3), np.float32)}, "'w' has shape \\(2, 3\\)"),
        ({**REFERENCE, "w": np.zeros((2, 2), np.float64)}, "'w' has dtype float64"),
        ({**REFERENCE, "b": np.array([0.0, np.nan], np.float32)}, "'b' holds 1 non-finite"),
        ({**REFERENCE, "b": np.array([np.inf, np.inf], np.float32)}, "'b' holds 2 non-finite"),
    ],
)
def test_check_update_rejects_what_does_not_fit(
    update: dict[str, np.ndarray], message: str
) -> None:
    """Names, shapes, dtypes and finiteness are checked, with the site and tensor named."""
    with pytest.raises(InvalidUpdateError, match=message) as caught:
        check_update(REFERENCE, update, "site-7")
    assert "site-7" in str(caught.value)
