"""Backend registry: config ``kind`` -> probe class.

Policy: adding a backend (say, an Iris-style job controller polled over HTTP) is one new
module with a class taking its config model, plus one line here. Imports are lazy so that a
replay-only ``jobtables demo`` never imports asyncssh or kubernetes_asyncio.
"""

from __future__ import annotations

import importlib
from typing import Any

from probes.base import ClusterProbe

BACKENDS: dict[str, str] = {
    "slurm": "probes.slurm.probe:SlurmProbe",
    "kubernetes": "probes.kubernetes.probe:KubernetesProbe",
    "replay": "probes.replay:ReplayProbe",
}


def make_probe(cluster: Any, **options: Any) -> ClusterProbe:
    """Build the probe for one ``[[clusters]]`` entry (a ``probes.config`` model)."""
    module_name, _, class_name = BACKENDS[cluster.kind].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    probe: ClusterProbe = cls(cluster, **options)
    return probe
