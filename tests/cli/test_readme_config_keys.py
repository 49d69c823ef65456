"""Every key ``jobtables.toml`` accepts is named in the README.

Found reading the config models against the README: ``[redis] key_prefix`` and twelve
``[deep_probe.judge]`` thresholds (``latest_steps``, ``garbage_char_share``, ...,
``missing_steps``) were accepted by check-config and used by the code, but the README named
none of them, so a user could neither find nor tune them (CONTRACT §5: every number
configurable).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from bot.config import Config
from probes.config import KubernetesCluster, ReplayCluster, SlurmCluster

README = Path(__file__).resolve().parents[2] / "README.md"


def config_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Each leaf key of ``model`` as a dotted path (``deep_probe.judge.latest_steps``)."""
    for name, field in model.model_fields.items():
        if name == "clusters":
            for kind in (SlurmCluster, KubernetesCluster, ReplayCluster):
                yield from config_keys(kind, "clusters.")
            continue
        nested = [a for a in (typing.get_args(field.annotation) or (field.annotation,))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        if nested:
            yield from config_keys(nested[0], f"{prefix}{name}.")
        else:
            yield prefix + name


def test_every_config_key_is_named_in_the_readme() -> None:
    """Each key's own name appears in the README as code (backticks or a TOML line)."""
    text = README.read_text()
    spans = " ".join(re.findall(r"`([^`\n]+)`", text))
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", spans))
    named |= set(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", text, re.MULTILINE))
    keys = sorted(set(config_keys(Config)))
    assert len(keys) > 100
    missing = [key for key in keys if key.rsplit(".", 1)[-1] not in named]
    assert not missing, missing
