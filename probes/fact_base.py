"""The base every fact model builds on: :class:`Frozen` and the log-clock time :data:`LogTime`.

Policy: one strict base model, so "frozen, no unknown fields" is decided once, for the facts
(:mod:`probes.models`, which re-exports both, and :mod:`probes.log_facts`), the roster
(``probes.config``), the report (``report.models``) and the Harbor trial stats.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from probes.logs.clock import on_log_clock


class Frozen(BaseModel):
    """The one strict base model: immutable, strict about field names.

    Every fact here, the cluster roster (``probes.config``), the report (``report.models``) and
    the Harbor trial stats build on it, so "frozen, no unknown fields" is decided once.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")


LogTime = Annotated[datetime, AfterValidator(on_log_clock)]
"""A time read from a log: zone-aware on the log's own clock (policy: ``probes.logs.clock``).
A zone-less value (an older stored point, a test) is labelled UTC with its digits kept."""
