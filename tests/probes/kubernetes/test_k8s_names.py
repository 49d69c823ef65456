"""A Job's name is its ``metadata.name`` (what ``kubectl get jobs`` lists), whatever labels a
chart or kustomization adds."""

from __future__ import annotations

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_probe import only_job
from tests.report.factories import judge

VERL_LOG = "".join(
    f"step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2 - critic/score/mean:0.4\n"
    for s in (1, 2, 3)
)


async def test_recommended_app_labels_do_not_rename_a_job(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Two runs launched from one chart carry ``app.kubernetes.io/name: trainer`` (Kubernetes'
    recommended label: the application's name, shared by its instances) and their own
    ``app.kubernetes.io/instance``. Each keeps its Job name, so its bucket and its log's
    metrics are its own. Both read 'trainer', bucket other, no step: the label was taken as
    the job's name."""
    for name in ("rl-grpo-7b-a", "rl-grpo-7b-b"):
        standin.jobs[name] = make_job(name, active=1, labels={
            "app.kubernetes.io/name": "trainer", "app.kubernetes.io/instance": name})
        standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
        standin.logs[f"{name}-0"] = VERL_LOG
    facts = await probe.collect()
    for name in ("rl-grpo-7b-a", "rl-grpo-7b-b"):
        report = judge(only_job(facts, name)).report
        assert (report.name, report.bucket, report.step) == (name, "rl", 3)
