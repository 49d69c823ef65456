"""The collector's one search for checkpoint-naming lines equals testing every line.

``probes.remote.logged_paths._logged_lines`` searches the joined last 5000 lines once; the reference
runs ``_LOGGED_LINE`` on each of those lines, as the collector did before.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.remote.logged_paths import _LOGGED_LINE, _logged_lines, logged_checkpoint_dirs

PIECES = ["checkpoint", "Saving", "saved", "save", "saves", "global_step_40", "iter_0000080",
          "iter_x", "/ckpt/run/checkpoint-40", " ", "\n", "\r\n", "\r", "\x0b", "\x1c",
          "\u2028", "loss 0.3", "Checkpoint", "SAVE", "x", "\u017fave", "\u0130ter_1",
          "\u0131ter_2", "chec\u212apoint", "iter_\u0663", "\udcff", "GLOBAL_STEP"]


def _per_line(text: str) -> list[str]:
    return [line for line in text.splitlines()[-5000:] if _LOGGED_LINE.search(line)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=60))
def test_one_search_equals_every_line(parts: list[str]) -> None:
    """Any mix of names, separators (all that ``splitlines`` knows), the non-ASCII letters
    that match ASCII ones without case, a lone surrogate and text agrees."""
    text = "".join(parts)
    assert _logged_lines(text) == _per_line(text)


def test_only_the_last_5000_lines_are_read() -> None:
    """A save line above the last 5000 lines is not read; one inside them is."""
    early = "Saving model checkpoint to /w/out/checkpoint-10\n"
    late = "Saving model checkpoint to /w/out/checkpoint-20\n"
    text = early + "step\n" * 5000 + late + "step\n" * 10
    assert _logged_lines(text) == [late.strip()]
    assert logged_checkpoint_dirs(text, ["/w"]) == [("/w", ["out"])]
    assert _logged_lines(None) == [] and _logged_lines("") == []
