"""The per-line readers' shortcuts read what their plain versions read.

``parse_pairs`` reads a plain number without ``parse_number``; the reference below is every
pair through ``parse_number``, as before. Values are drawn to sit on the shortcut's edges:
signs, points, exponents, underscores, NaN and infinities, quotes of either kind or mismatched,
whitespace, calls (``np.float64(x)``), non-ASCII digits, lengths about the cap."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.lines import _NUMBER_CAP, _PAIR_RE, parse_number, parse_pairs

PROPERTY = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PIECES = ["0", "1", "9", "12", "-", "+", ".", "e", "E", "-5", "_", "nan", "inf", "NaN",
          "Infinity", " ", "\t", "٣", "x", "True", "F", "(", ")", "np.float64(", "'", '"',
          "1" * (_NUMBER_CAP - 2), "2" * _NUMBER_CAP, "3" * (_NUMBER_CAP + 1), ","]


def reference_pairs(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, raw in _PAIR_RE.findall(text):
        number = parse_number(raw)
        if number is not None:
            out[key] = number
    return out


values = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join)
quoted = st.tuples(st.sampled_from(["", "'", '"']), values, st.sampled_from(["", "'", '"'])
                   ).map("".join)


@PROPERTY
@given(st.lists(st.tuples(st.sampled_from(["loss", "grad_norm", "epoch", "a b", "k1"]), quoted),
                max_size=6))
def test_parse_pairs_as_through_parse_number(pairs: list[tuple[str, str]]) -> None:
    text = "{" + ", ".join(f"'{key}': {value}" for key, value in pairs) + "}"
    assert repr(parse_pairs(text)) == repr(reference_pairs(text))


@PROPERTY
@given(st.text(alphabet="'\":{}, 0123456789.-+e_nafiTF()x\n\t٣", max_size=120))
def test_parse_pairs_on_any_text(text: str) -> None:
    assert repr(parse_pairs(text)) == repr(reference_pairs(text))
