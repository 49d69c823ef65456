"""A job's name is drawn in its chart's title as it is: never parsed as matplotlib mathtext.

A name holding two ``$`` is mathtext to matplotlib; ``sft $\\frac{$`` made ``savefig`` raise
(``ParseSyntaxException``), so ``/job`` of that job answered nothing (the chart is drawn before
the answer is sent).
"""

from __future__ import annotations

import math

import pytest

from bot.chart import render_history_png
from probes.models import MetricPoint
from tests.bot.builders import detail, job

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["sft $\\frac{$ run", "a $x^{$ b $}_$", "$(touch /tmp/pwn)$",
                                  "rl-$\\undefinedcommand$-🚀"])
def test_a_name_with_dollars_is_drawn_not_parsed(name: str) -> None:
    """Names that are broken mathtext still give a PNG."""
    history = tuple(MetricPoint(step=s, values={"loss": 1.0 / s, "grad_norm": math.sqrt(s)})
                    for s in range(1, 6))
    png = render_history_png(detail(job("7", name, bucket="sft"), history=history))
    assert png is not None and png.startswith(PNG)
