"""Terminal title (OSC) and other non-colour escapes are stripped whole, on every path."""

from __future__ import annotations

import pytest

from probes.logs.lines import strip_ansi
from probes.logs.parse import parse_log
from probes.remote.logread import plain_text

FRAMES = '  File "train.py", line 9, in <module>\n    main()\nValueError: bad\n'


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        ("\x1b]0;x\x07\x1b[2J Traceback", " Traceback"),
        ("\x1b]2;train: step 5\x1b\\loss 1.2", "loss 1.2"),
        ("\x1b]8;;http://h/x\x1b\\link\x1b]8;;\x1b\\ ok", "link ok"),
        ("\x1b(B\x1b[m\x1b[1;31mERROR\x1b(B\x1b[m boom", "ERROR boom"),
        ("\x1b7\x1b[?25l\x1b8\x1b[0 qdone\x1b=", "done"),
        ("\x1bPq#0;2;0;0;0\x1b\\after", "after"),
        ("plain \x1b stray", "plain  stray"),
    ],
)
def test_strip_ansi_removes_whole_sequences(raw: str, plain: str) -> None:
    """An OSC title, a hyperlink, charset and keypad escapes leave no residue (']0;x')."""
    assert strip_ansi(raw) == plain


def test_collector_keeps_the_bell_that_ends_an_osc() -> None:
    """The SLURM collector keeps BEL (as ESC): '?' in its place left the OSC unterminated."""
    assert plain_text(b"\x1b]0;x\x07ok\x00") == "\x1b]0;x\x07ok?"


@pytest.mark.parametrize("lead", ["\x1b]0;x\x07\x1b[2J ", "\x1b]0;x\x07", "  "])
def test_traceback_after_a_title_escape_is_found_on_slurm_and_kubernetes(lead: str) -> None:
    """printf '\\033]0;x\\007\\033[2J Traceback ...': the header is found, through the SLURM
    collector's text and the raw (Kubernetes) text alike, its exception quoted."""
    raw = f"{lead}Traceback (most recent call last):\n{FRAMES}".encode()
    for text in (plain_text(raw), raw.decode()):
        faults = parse_log(text).faults
        assert [(f.kind, f.excerpt) for f in faults] == [("traceback", "ValueError: bad")]


def test_indented_traceback_block_reads_its_exception() -> None:
    """A traceback shifted right as a whole (a header after a cleared screen, or indented
    output) still takes its exception line at the header's indent, not a cut-off."""
    text = "  Traceback (most recent call last):\n    File \"t.py\", line 1, in <module>\n" \
           "      f()\n  KeyError: 'messages'\nnext line\n"
    faults = parse_log(text).faults
    assert [(f.kind, f.excerpt) for f in faults] == [("traceback", "KeyError: 'messages'")]
