"""A job whose history steps are its order only (``steps_unanchored``) claims no step in its
signal evidence either.

The history table and JSON already show such steps as unknown (``—``/null: a cut tail's
bar-less HF dicts, an OpenRLHF resumed episode whose batch size the log never printed), but the
signal-evidence table printed each window's step as the point's count (2, 3, ...: no step of
the run), and ``evidence[].step`` in ``jobtables job --format json`` likewise.
"""

from __future__ import annotations

import json

from report.render import render_job_detail, render_job_json
from tests.probes.logs.test_openrlhf_resume import _resumed
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log


def test_unanchored_evidence_has_no_step() -> None:
    text = _resumed(27, 38, namespace=False).replace(
        ", kl=", ", entropy_loss=0.8, actor_grad_norm=0.2, kl=")
    detail = judge(_from_log(text, name="rl-ppo"))
    assert detail.steps_unanchored and detail.evidence
    obj = json.loads(render_job_json(detail))
    assert all(e["step"] is None for e in obj["evidence"])
    text = render_job_detail(detail, width=100)
    evidence = text[text.index("Signal evidence"):].splitlines()
    rows = [line for line in evidence if line.startswith("│ grad_norm") or
            line.startswith("│ entropy")]
    assert rows and all(line.split("│")[2].strip() == "—" for line in rows)
