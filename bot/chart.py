"""A PNG chart of one run's metric history, for ``/job``.

Policy: matplotlib with the Agg backend (no display, thread-safe enough when each call owns
its own ``Figure``; we never touch pyplot's global state). Which metrics are drawn follows the
bucket: RL reward, entropy and grad norm; SFT loss and grad norm; any other bucket whichever of
those the run logged. Non-finite values are dropped from the line and marked on the x axis so
a NaN loss stays visible. The collapse step, when there is one, is a dashed vertical line.
A history whose steps are only its order (``JobDetail.steps_unanchored``: a cut tail's bar-less
HF dicts) is drawn against that order, labelled so: no step of the run is claimed.
Returns ``None`` when the run has no history to draw.
"""

from __future__ import annotations

import io
import math
import re
import warnings

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.models import MetricPoint
from report.models import JobDetail

PANELS: dict[str, tuple[str, ...]] = {
    "rl": ("reward", "entropy", "grad_norm"),
    "sft": ("loss", "grad_norm"),
}
FALLBACK_PANELS = ("reward", "entropy", "loss", "grad_norm")
_GLYPH_FILTER = ("ignore", re.compile(r"Glyph \d+ \(.*\) missing from font", re.IGNORECASE),
                 UserWarning, re.compile(r"bot\.chart\Z"), 0)
"""matplotlib's missing-glyph warning from this module, as ``warnings.filters`` holds it
(``(action, message, category, module, lineno)``: :func:`quiet_missing_glyphs`)."""


def chart_metrics(detail: JobDetail) -> tuple[str, ...]:
    """The metrics to draw for this run: its bucket's panels that have at least one value."""
    wanted = PANELS.get(detail.report.bucket, FALLBACK_PANELS)
    logged = {name for point in detail.history for name in point.values}
    return tuple(name for name in wanted if name in logged)


def quiet_missing_glyphs() -> None:
    """An emoji in a job's name has no glyph in matplotlib's fonts: it is drawn as a box, and
    warned on stderr for each emoji at every chart. Ignored for the charts drawn here only
    (matplotlib names as a warning's origin its first caller outside it: this module).

    Checked at each drawing, not set once at import: whoever resets the filters later
    (pytest does, around each test) would drop it; ``catch_warnings`` is not thread-safe,
    and the charts are drawn in worker threads. Added only when missing: each change of the
    filters makes Python show again the warnings it had shown once."""
    if _GLYPH_FILTER not in warnings.filters:
        warnings.filterwarnings("ignore", message=_GLYPH_FILTER[1].pattern,
                                category=UserWarning, module=_GLYPH_FILTER[3].pattern)


def render_history_png(detail: JobDetail, *, dpi: int = 100) -> bytes | None:
    """The run's history as PNG bytes, or ``None`` if there is nothing to draw."""
    metrics = chart_metrics(detail)
    if not metrics:
        return None
    quiet_missing_glyphs()
    fig = Figure(figsize=(8, 2.2 * len(metrics)), dpi=dpi)
    axes = fig.subplots(len(metrics), 1, sharex=True, squeeze=False)[:, 0]
    history, collapse = detail.history, detail.collapse_step
    if detail.steps_unanchored:  # their order only: numbered 1, 2, ... as logged
        history = tuple(p.model_copy(update={"step": n}) for n, p in enumerate(history, 1))
        collapse = None
    for ax, name in zip(axes, metrics, strict=True):
        _draw_metric(ax, name, history, collapse)
    axes[-1].set_xlabel("logged point (steps unknown)" if detail.steps_unanchored else "step")
    # A job's name as it is: two "$" in it are mathtext to matplotlib, and broken mathtext
    # made savefig raise (no /job answer at all).
    fig.suptitle(f"{detail.report.cluster}:{detail.report.job_id} {detail.report.name}",
                 parse_math=False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _draw_metric(
    ax: Axes, name: str, history: tuple[MetricPoint, ...], collapse_step: int | None
) -> None:
    steps = [p.step for p in history if name in p.values and math.isfinite(p.values[name])]
    values = [p.values[name] for p in history if name in p.values and math.isfinite(p.values[name])]
    bad = [p.step for p in history if name in p.values and not math.isfinite(p.values[name])]
    ax.plot(steps, values, linewidth=1.2)
    if bad:
        ax.plot(bad, [0.0] * len(bad), "rx", label="non-finite")
        ax.legend(loc="upper left", fontsize="small")
    if collapse_step is not None:
        ax.axvline(collapse_step, color="red", linestyle="--", linewidth=1)
    ax.set_ylabel(name)
    ax.grid(True, alpha=0.3)
