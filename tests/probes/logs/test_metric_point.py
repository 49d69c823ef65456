"""``metric_point`` builds the very object ``MetricPoint.model_construct`` builds."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from probes.logs.scan_core import metric_point
from probes.models import MetricPoint


@pytest.mark.parametrize("at", [None, datetime(2026, 2, 12, 14, 31, 7, tzinfo=UTC)])
def test_equals_model_construct_in_every_respect(at: datetime | None) -> None:
    values = {"loss": 1.5, "grad_norm": float("inf")}
    fast = metric_point(7, values, 12, at)
    slow = MetricPoint.model_construct(step=7, values=values, line_no=12, wall_time=at)
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_dump_json() == slow.model_dump_json()
    assert pickle.loads(pickle.dumps(fast)) == slow
    assert fast.model_copy(update={"step": 8}).step == 8
    with pytest.raises(ValueError, match="frozen"):
        fast.step = 9  # type: ignore[misc]
    assert MetricPoint.model_validate(fast.model_dump()) == fast
