"""The Trend cell: short human sentences and a unicode sparkline.

Policy: a trend reads like what an operator would type into the table ("Loss descending;
healthy", "Checkpoint saved. Slight dip from 0.652"), states the one thing that matters, and
stays under :data:`TREND_MAX` characters (tables wrap long cells, but a short cell wraps less).
Numbers are shown with 3 significant figures (:func:`report.cells.format_value`); percentages
as whole percents with a real minus sign. Non-finite values in a sparkline are drawn as ``×``
so a NaN is visible, not skipped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from report.cells import format_value
from report.models import SignalEvidence

TREND_MAX = 60
BARS = "▁▂▃▄▅▆▇█"
_FLAT_REL = 0.02
"""Relative change below which a series reads as "stable"/"flat" (display wording only)."""
_DIP_REL = 0.10
"""A drop from the recent peak below this reads as a "slight dip", above it as "falling"."""
_STEADY_REL = 0.005
"""A fitted change across the window below this (relative to the loss) reads as "flat", however
steady."""
LOSS_FLOOR = _FLAT_REL
"""The least span of the loss sparkline, relative to its level (``with_sparkline``'s floor):
a loss moving less than its Trend words call a trend is drawn about the middle, not
stretched over every bar."""
REWARD_FLOOR = _FLAT_REL
"""The least span of the reward sparkline, relative to its level: as :data:`LOSS_FLOOR`, a
reward the Trend words call "Stable" is drawn about the middle, not stretched over every bar."""
_STEADY_T = 5.0
"""A fitted slope within this many of its standard errors is noise, not a trend. At 3, uniform
noise about a level fitted a "trend" in 2.4% of 8-point windows (2 of 40 seeded reward
windows read "Reward rising"); at 5, 0.2%, while a steady line (no residual) always reads."""


def sparkline(values: Sequence[float], width: int = 8, floor: float = 0.0) -> str:
    """Draw the last ``width`` values as ``▁▂▃▄▅▆▇█`` (``×`` for a non-finite value), scaled
    to their min and max, or to a span of ``floor`` x their mean level about their middle when
    they vary less (a loss wandering by 0.1% is drawn level, as its Trend words read it)."""
    tail = list(values)[-width:] if width > 0 else []
    finite = [v for v in tail if math.isfinite(v)]
    if not finite:
        return "×" * len(tail)
    low, high = min(finite), max(finite)
    span = high - low
    least = floor * abs(sum(finite) / len(finite))
    if 0 < span < least:
        low, span = (low + high - least) / 2, least
    out = []
    for v in tail:
        if not math.isfinite(v):
            out.append("×")
        elif span <= 0:
            out.append(BARS[len(BARS) // 2])
        else:
            out.append(BARS[min(len(BARS) - 1, int((v - low) / span * len(BARS)))])
    return "".join(out)


def signed_pct(fraction: float) -> str:
    """Return ``−62%`` / ``+35%`` with a typographic minus."""
    return f"{fraction:+.0%}".replace("-", "−")


def shorten(text: str, limit: int = TREND_MAX) -> str:
    """``text`` in at most ``limit`` characters, its informative end kept where it can be.

    A text that fits is left alone. Else, in turn until it fits: a dotted module path is
    dropped to its last component (``torch.distributed.elastic.multiprocessing.api.
    SignalException: Process 12 got signal: 15`` -> ``SignalException: ...``); long names and
    paths (a pod name, a log path, a service account) lose their middle, longest first and only
    as much as needed (``pod/rl-grpo…x7k2p``), never a number, an IP address or a URL's
    scheme, host and port (only a URL's path); last, the end is cut with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    text = _MODULE_PATH.sub("", text)
    if len(text) > limit:
        text = _squeeze_names(text, len(text) - limit)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


_MODULE_PATH = re.compile(r"(?<![\w./-])(?:[a-z_][a-z0-9_]*\.)+(?=[A-Z][A-Za-z0-9_]*\b)")
"""``a.b.c.`` before a class name (``torch.cuda.OutOfMemoryError``, ``ray.exceptions.X``)."""
_TOKEN = re.compile(r"[^\s\"'`()\[\]{}<>,;]+")
_NAME_MARKS = frozenset("/_.:-")
"""A token holding one of these is a name or a path (prose and class names hold none)."""
_NUMBER = re.compile(r"[-+]?(?:\d[\d_,]*)?\.?\d+(?:[eE][-+]?\d+)?%?")
"""A number (``12345678901234.5``, ``-1.5e-07``): never squeezed."""
NAME_KEEP = 14
"""A name is never squeezed below this many characters (its ellipsis included)."""
_ADDRESS = re.compile(
    r"\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?"
    r"|\[?[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}\]?(?::\d{1,5})?"
)
"""An IPv4 or IPv6 address, with a port or not: never squeezed (``10.100…50:8000`` names
another host)."""
_URL_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")
"""A URL's scheme, host and port: kept whole; only the path after them may lose its middle."""
_KIND = re.compile(r"[A-Za-z][\w.-]{0,15}/")
"""A kind before a name (``pod/``, ``jobs.batch/``): kept whole, the name squeezed after it."""


def _squeeze_names(text: str, excess: int) -> str:
    """``text`` with up to ``excess`` characters taken from the middle of its long names."""
    spans = []
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        end = start + len(match.group().rstrip(".:"))  # a trailing colon stays outside
        if _ADDRESS.fullmatch(text, start, end):  # a cut address reads as another
            continue
        if (origin := _URL_ORIGIN.match(text, start, end)) is not None:
            start = origin.end()  # a URL's scheme, host and port say where: only its path
        if (end - start > NAME_KEEP and not _NAME_MARKS.isdisjoint(text[start:end])
                and not _NUMBER.fullmatch(text, start, end)):  # a cut number reads as another
            spans.append((start, end))
    cuts: dict[int, tuple[int, int]] = {}
    for start, end in sorted(spans, key=lambda span: span[0] - span[1]):  # longest first
        if excess <= 0:
            break
        size = max(NAME_KEEP, end - start - excess)
        cuts[start] = (end, size)
        excess -= end - start - size
    out, at = [], 0
    for start in sorted(cuts):
        end, size = cuts[start]
        kind = _KIND.match(text, start, end)
        skip = len(kind.group()) if kind and size - 1 - len(kind.group()) >= 6 else 0
        head = skip + (size - 1 - skip) // 2
        out += [text[at:start], text[start:start + head], "…", text[end - (size - 1 - head):end]]
        at = end
    out.append(text[at:])
    return "".join(out)


def finite_series(values: Sequence[float]) -> list[float]:
    """Return the finite values of a series (trend words ignore NaN/inf)."""
    return [v for v in values if math.isfinite(v)]


def describe_reward(values: Sequence[float], *, checkpoint_saved: bool = False) -> str:
    """Describe a reward series: rising / stable / slight dip from peak / falling over the
    sparkline's 8 points: the drop from the peak, the older vs newer half's means, or a steady
    slope (``steady_change``) both miss (a steady 1.4% rise read "Stable" beside ``▁▂▃▄▅▆▇█``)."""
    series = finite_series(values)
    prefix = "Checkpoint saved. " if checkpoint_saved else ""
    if len(series) < 2:
        return prefix + "First steps logged"
    recent = series[-8:]
    latest, first, peak = recent[-1], recent[0], max(recent)
    scale = max(abs(peak), abs(first), 1e-12)
    if peak > latest and (peak - latest) / scale > _FLAT_REL:
        word = "Slight dip" if (peak - latest) / scale <= _DIP_REL else "Reward falling"
        return f"{prefix}{word} from {format_value(peak)}"
    before, after = _halves(recent)
    change = (after - before) / scale
    if change <= _FLAT_REL:  # the halves see no rise: a steady slope they miss may be one
        change = steady_change(recent)
    if change > 0:
        return f"{prefix}Reward rising {format_value(first)}→{format_value(latest)}"
    if change < 0:  # a steady fall too small for the dip rule above is still a dip
        return f"{prefix}Slight dip from {format_value(peak)}"
    return prefix + "Stable"


def _halves(recent: Sequence[float]) -> tuple[float, float]:
    # Means of the older and newer half: one noisy step must not flip "descending" to "rising".
    middle = len(recent) // 2
    older, newer = recent[:middle], recent[middle:]
    return sum(older) / len(older), sum(newer) / len(newer)


def describe_loss(values: Sequence[float]) -> str:
    """Describe a loss series: descending / flat / rising over the sparkline's 8 points: the
    older vs newer half's means, or a steady slope (``steady_change``) the halves miss."""
    series = finite_series(values)
    if len(series) < 2:
        return "First steps logged"
    recent = series[-8:]
    before, after = _halves(recent)
    scale = max(abs(before), 1e-12)
    change = (after - before) / scale
    if abs(change) <= _FLAT_REL:
        change = steady_change(recent)
    if change < 0:
        return "Loss descending; healthy"
    if change > 0:
        return "Loss rising"
    return "Loss flat; healthy"


def steady_change(recent: Sequence[float]) -> float:
    """The least-squares line's change across ``recent`` relative to its mean, when the line
    is the series' story: at least :data:`_STEADY_REL` and :data:`_STEADY_T` standard errors
    of the slope (noise about a level makes neither); else 0.0. A loss falling 1.4% across 8
    points, steadily, was "flat" by the halves (0.7% apart) beside a sparkline ``█▇▆▅▄▃▂▁``."""
    count = len(recent)
    if count < 4:
        return 0.0
    mid_x, mean = (count - 1) / 2, sum(recent) / count
    spread = sum((x - mid_x) ** 2 for x in range(count))
    slope = sum((x - mid_x) * (y - mean) for x, y in enumerate(recent)) / spread
    residual = sum((y - mean - slope * (x - mid_x)) ** 2 for x, y in enumerate(recent))
    error = math.sqrt(residual / (count - 2) / spread)
    change = slope * (count - 1) / max(abs(mean), 1e-12)
    if abs(change) < _STEADY_REL or abs(slope) <= _STEADY_T * error:
        return 0.0
    return change


def collapse_text(fired: Sequence[SignalEvidence], grad_norm_abs: float) -> str:
    """``COLLAPSE: grad_norm 3.20 (>1.0), entropy −62% vs trend`` (``grad_norm_abs``: the
    configured bound the grad-norm signal was judged by)."""
    return shorten("COLLAPSE: " + ", ".join(signal_phrase(e, grad_norm_abs) for e in fired))


def bound_text(bound: float) -> str:
    """A configured bound as the rulebook writes it: ``1.0``, ``10.0``, ``0.5``."""
    return f"{bound:.1f}" if bound.is_integer() else f"{bound:g}"


def signal_phrase(e: SignalEvidence, grad_norm_abs: float) -> str:
    """One fired signal in a few words (used in trends and recommendation reasons);
    ``grad_norm_abs`` is ``[thresholds] grad_norm_abs``, the bound the signal was judged by."""
    if e.signal == "grad_norm":
        if e.window_mean and math.isfinite(e.value) and e.value <= grad_norm_abs:
            return f"grad_norm {format_value(e.value)} ({e.value / e.window_mean:.1f}× window)"
        return f"grad_norm {format_value(e.value)}" + (
            f" (>{bound_text(grad_norm_abs)})" if math.isfinite(e.value) else "")
    if e.signal == "entropy" and e.window_mean and math.isfinite(e.value):
        return f"entropy {signed_pct((e.value - e.window_mean) / abs(e.window_mean))} vs trend"
    if e.signal == "log_ratio" and e.window_mean and math.isfinite(e.value):
        return f"log_ratio {e.value / e.window_mean:.1f}× window"
    if e.signal == "pass_rate":
        return f"pass-rate {e.value:.0%}"
    return f"{e.signal} {format_value(e.value)}"


def with_sparkline(text: str, values: Sequence[float], *, floor: float = 0.0) -> str:
    """Append a sparkline of ``values`` to ``text`` when there is room and enough points
    (``floor``: ``sparkline``'s least span, relative to the level)."""
    if len(values) < 3:
        return shorten(text)
    line = sparkline(values, floor=floor)
    return shorten(text) if len(text) + len(line) + 1 > TREND_MAX else f"{text} {line}"
