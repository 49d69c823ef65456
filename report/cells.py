"""The one set of number and duration formatters: table cells, trend texts, Slack alerts.

Policy: a number is never misleading, wherever it is shown. A metric not emitted is ``—``
(U+2014), never ``0``; a nonzero value never prints as ``0.000`` (values under 1e-3, the
seqnorm global-denominator regime, go to compact scientific notation such as ``1.2e-05``); NaN
prints ``NaN`` and infinities ``inf``/``-inf`` so a blown-up run is visible at a glance. Table
columns use fixed decimals (:func:`format_number`), prose uses three significant figures
(:func:`format_value`). Large counts are humanised (``~8.6k``) as the seed's Datagen table
does; durations (elapsed, ETA, silence) read ``45s``, ``12m``, ``3h05m``, ``2d04h``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from probes.models import ACTIVE_STATES, JobState

DASH = "—"
_TINY = 1e-3
_HUGE = 1e6
_PROSE_HUGE = 1e5

EXCEPTION_ABBREVIATIONS: Mapping[str, str] = {
    "AgentTimeoutError": "AgentTO",
    "ContextLengthExceededError": "CtxLen",
    "ContextWindowExceededError": "CtxLen",
    "OutputLengthExceededError": "OutLen",
    "AgentSetupTimeoutError": "SetupTO",
    "EnvironmentStartTimeoutError": "EnvStartTO",
    "VerifierTimeoutError": "VerifierTO",
    "VerifierOutputParseError": "VerifParse",
    "RewardFileNotFoundError": "NoReward",
    "RewardFileEmptyError": "EmptyReward",
    "NonZeroAgentExitCodeError": "AgentExit",
    "SandboxBuildFailedError": "SandboxBuild",
    "RateLimitError": "RateLimit",
    "AsyncRateLimitError": "RateLimit",
}
_EXC_MAX = 12


def printable(text: str) -> str:
    """Text safe for a fixed-width cell: tabs, ANSI escapes and other control characters
    become spaces (they would shift the box), line breaks are kept."""
    if text.isprintable():  # nearly every cell: one C pass, no per-character join
        return text
    return "".join(ch if ch == "\n" or ch.isprintable() else " " for ch in text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _byte_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def shown_path(text: str) -> str:
    """A path (or text naming one) as it is shown: each byte that is not UTF-8, which the
    probes keep as ``os.fsdecode``'s lone surrogate so the login node can open the file
    (``sbatch -o $'log\\xff_%j.out'``), as ``\\xNN``. Nothing that holds one reaches a
    terminal, a JSON consumer (it must stay valid UTF-8) or Slack as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_byte_escape, text)
    return text


def shown_json(text: str) -> str:
    """JSON text (``ensure_ascii=False``) with :func:`shown_path` applied inside its strings:
    a byte that is not UTF-8 left in any cluster text reads ``\\xNN`` once parsed, and the
    document stays valid UTF-8 (the paths the judge shows are escaped already)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Outside its strings JSON text is ASCII: every surrogate is inside a string, where
        # the escape's backslash is written doubled.
        return _SURROGATE.sub(lambda m: _byte_escape(m).replace("\\", "\\\\"), text)
    return text


NEWLINE_MARK = "\u2424"
_BREAK = re.compile(r"\r\n|\n|\r")
"""What a line break in a name shows as (␤, SYMBOL FOR NEWLINE, one column wide)."""


def one_line(text: str) -> str:
    """A name on one line: a job name is one token to a reader, but the scheduler takes any
    text (``sbatch -J $'rl-a\\nrl-b'``), and a line break in it made a Job cell of two lines
    that read as two jobs. Each line break shows as :data:`NEWLINE_MARK`."""
    if "\n" not in text and "\r" not in text:
        return text
    return _BREAK.sub(NEWLINE_MARK, text)


def _non_finite(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return None


def format_number(value: float | str | None, decimals: int = 3, *, trim: bool = False) -> str:
    """Format a metric with fixed decimals; ``trim`` drops trailing zeros beyond two decimals."""
    if value is None:
        return DASH
    if isinstance(value, str):
        return value or DASH
    value = float(value)
    if (special := _non_finite(value)) is not None:
        return special
    if value == 0:
        return f"{0.0:.{decimals}f}"
    if abs(value) < _TINY or abs(value) >= _HUGE:
        return f"{value:.1e}"
    text = f"{value:.{decimals}f}"
    if trim and "." in text:
        whole, frac = text.split(".")
        text = f"{whole}.{frac.rstrip('0').ljust(2, '0')}"
    return text


def format_value(value: float | None) -> str:
    """A value in prose: 3 significant figures, scientific when tiny or huge (``2.80``,
    ``0.652``, ``1.00e-05``, ``250``)."""
    if value is None:
        return DASH
    if (special := _non_finite(value)) is not None:
        return special
    if value != 0 and (abs(value) < _TINY or abs(value) >= _PROSE_HUGE):
        return f"{value:.2e}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def format_count(value: float | str | None, *, exact: bool = False) -> str:
    """A count such as a trial total: exact below 1,000 (or when asked), else ``~8.6k``."""
    if value is None or isinstance(value, str) or not math.isfinite(value):
        return format_number(value)
    count = round(value)
    if exact or abs(count) < 1_000:
        return str(count)
    if abs(count) < 10_000:
        return f"~{count / 1e3:.1f}k"
    if abs(count) < 1_000_000:
        return f"~{count / 1e3:.0f}k"
    return f"~{count / 1e6:.1f}M"


def format_step(step: int | None, total: int | None) -> str:
    """``15/80``, ``15/—`` when the total is unknown, ``—`` before the first step."""
    if step is None:
        return DASH
    return f"{step}/{DASH if total is None else total}"


def format_duration(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h``; ``—`` when unknown (negative reads ``0s``)."""
    if seconds is None:
        return DASH
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def format_state(state: JobState) -> str:
    """Active states in lower case, terminal ones in capitals so they stand out (seed)."""
    return state.value.lower() if state in ACTIVE_STATES else state.value


def abbreviate_exception(name: str) -> str:
    """Short type for the Eval ``top exc`` cell: ``AgentTimeoutError`` -> ``AgentTO``."""
    bare = name.rsplit(".", 1)[-1].strip()
    if bare in EXCEPTION_ABBREVIATIONS:
        return EXCEPTION_ABBREVIATIONS[bare]
    for suffix in ("Exception", "Error"):
        if bare.endswith(suffix) and len(bare) > len(suffix):
            bare = bare[: -len(suffix)]
            break
    bare = bare.replace("Timeout", "TO")
    return bare if len(bare) <= _EXC_MAX else bare[: _EXC_MAX - 1] + "…"
