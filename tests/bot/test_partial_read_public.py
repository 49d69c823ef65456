"""Review of e502067: a cluster read in part says why in Slack as an unreachable one does.

e502067 keeps a Kubernetes cluster's Jobs when its JobSet list alone fails (a 5xx, a 429, no
answer, an answer that is no object), the cluster ``ok`` with the detail ``JobSets not listed:
<the list's error>``. That error is now a connection's or a server's text (aiohttp's
``Cannot connect to host <address>``, an API server's 500 body, a proxy's page), not only
RBAC's 403; the Slack surfaces that show a partial read (the /jobs header, the period's
parent, /job's not-found answer) showed it raw, where an unreachable cluster's detail goes
through ``report.sweep_summary.public_reason`` (no addresses, URLs, paths, host names).
"""

from __future__ import annotations

import dataclasses

import pytest

from bot.errors import JobNotFoundError
from bot.messages import sweep_header, sweep_parent
from bot.sweep_result import SweepResult
from report.models import ClusterReport
from tests.bot.builders import T0, sweep_result

# (the detail as probes.kubernetes.probe writes it, what Slack must not show)
PARTIAL = [
    ("JobSets not listed: list jobsets: ClientConnectorError: Cannot connect to host "
     "kube-api.corp.example:6443 ssl:default [Connect call failed ('10.2.0.7', 6443)]",
     ["kube-api.corp", "10.2.0.7", "6443"]),
    ("JobSets not listed: list jobsets: HTTP 500 Internal Server Error: Internal error "
     "occurred: dial tcp 10.96.0.12:2379: i/o timeout (https://10.96.0.12:2379/v3/kv)",
     ["10.96.0.12", "2379"]),
]


def _partial(detail: str) -> SweepResult:
    base = sweep_result([], clusters=("beta",))
    beta: ClusterReport = base.report.clusters[0].model_copy(update={"detail": detail})
    return dataclasses.replace(base, report=base.report.model_copy(
        update={"clusters": [beta]}))


@pytest.mark.parametrize(("detail", "secrets"), PARTIAL)
def test_a_partial_reads_reason_is_shown_as_public_reason(detail: str,
                                                          secrets: list[str]) -> None:
    """The header, the parent and /job's not-found answer still say JobSets were not listed,
    without the address, host or URL of the error."""
    result = _partial(detail)
    parent = sweep_parent(result, period_start=T0, now=T0, period_hours=24, sweeps=1)
    with pytest.raises(JobNotFoundError) as raised:
        result.find(None, "rl-missing")
    not_found = str(raised.value)
    for shown in (sweep_header(result, age_s=None), parent.text + str(parent.blocks),
                  not_found):
        assert "JobSets not listed" in shown, shown
        for secret in secrets:
            assert secret not in shown, (secret, shown)
