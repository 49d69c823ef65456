"""``fingerprint_lines._FLAT_DICT``, the one-line flat dict test of a line's skeleton, is the
pattern it was, made linear: a line cut at ``max_line_chars`` inside a quoted dict (a huge
printed config or sample, no closing brace) made the old pattern try every quote as the one
it needs, each time scanning to the line's end (``parse_log``: 1 s for a 30 KB line, ~2 s for
a 64 KiB one; ``test_fuzz_logparse``'s two 1 MB lines 5 s). The reference below is that
pattern; the skeletons drawn mix the brackets, quotes and spaces it tests, in any order."""

from __future__ import annotations

import re
from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.logs.fingerprint_lines import _FLAT_DICT

REFERENCE = re.compile(rb"[ \t\r\f\v]*\{[^{}\[\]()\n]*['\"][^{}\[\]()\n]*\}[ \t\r\f\v]*")

_SKELETONS = st.lists(st.sampled_from([b"{", b"}", b"[", b"]", b"(", b")", b"'", b'"', b" ",
                                       b"\t", b"\n", b"k", b":", b",", b"\xe6"]),
                      max_size=14).map(b"".join)


def same(skeleton: bytes) -> bool:
    return (_FLAT_DICT.fullmatch(skeleton) is None) == (REFERENCE.fullmatch(skeleton) is None)


def test_every_short_skeleton_is_judged_as_by_the_reference() -> None:
    """Every skeleton of up to 6 of a brace pair, a paren, both quotes, a space and a letter."""
    for size in range(7):
        assert all(same(bytes(parts)) for parts in product(b"{}('\" k", repeat=size))


@settings(max_examples=300, deadline=None)
@given(_SKELETONS)
def test_any_skeleton_is_judged_as_by_the_reference(skeleton: bytes) -> None:
    assert same(skeleton)

