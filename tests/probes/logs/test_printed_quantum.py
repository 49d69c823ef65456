"""``printed_quantum`` reads the last printed digit's place off a float's shortest repr, as
``Decimal(repr(value))``'s exponent gives it, for every float (nan and the infinities: 0)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import example, given
from hypothesis import strategies as st

from probes.logs.hf_banner import printed_quantum


def _by_decimal(value: float) -> float:
    exponent = Decimal(repr(value)).as_tuple().exponent
    return 10.0 ** exponent if isinstance(exponent, int) else 0.0


@given(st.floats())
@example(1.084)
@example(0.3)
@example(1.4)
@example(100.0)
@example(1e16)
@example(1.5e-7)
@example(-0.0)
@example(float("nan"))
@example(float("inf"))
@example(-2.5e300)
@example(5e-324)
def test_the_place_is_the_reprs_last_digit(value: float) -> None:
    """Every float's place equals the one Decimal reads from the same repr."""
    assert printed_quantum(value) == _by_decimal(value)


def test_an_epoch_printed_to_two_places() -> None:
    """An older Trainer's ``round(epoch, 2)`` is a place of 0.01; a 4-digit one of 0.0001."""
    assert printed_quantum(1.4) == 0.1
    assert printed_quantum(1.45) == 0.01
    assert printed_quantum(0.5123) == 0.0001
