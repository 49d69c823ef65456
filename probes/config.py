"""Cluster roster entries: how to reach each cluster and where its artefacts live.

Policy: one model per ``kind``; unknown keys are errors (a typo must not silently disable a
safety setting). SSH host keys are always checked: there is deliberately no option to skip
that. Paths may hold the placeholders ``{workdir} {name} {job_id} {user}``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StrictBool, field_validator, model_validator

from probes.ids import CLUSTER_NAME
from probes.models import Frozen

DEFAULT_CHECKPOINT_ROOTS = (
    "{workdir}/checkpoints",
    "{workdir}/ckpts",
    "{workdir}/ckpt",
    "{workdir}/checkpoints/{name}",
    "{workdir}/output",
    "{workdir}/outputs",
    "{workdir}/outputs/{name}",
    "{workdir}/results",
)
"""Where banked steps are looked for when a cluster names no ``checkpoint_roots``. Each root is
searched two plain directory levels deep (verl's ``checkpoints/<project>/<experiment>``, HF's
``outputs/<run>``, NeMo-RL's ``results/<algorithm>/step_N``, OpenRLHF's default
``ckpt/checkpoints_ppo_ray/_actor/global_stepN``; ``probes.remote.tree``), plus the
checkpoint directories the log prints inside the workdir or a root. Runs of other names launched
from one workdir share these: each banks only the steps it claims (``probes.slurm.shared_roots``).
"""

DEFAULT_TRIAL_ROOTS = ("{workdir}/jobs",)
"""Harbor's default ``jobs_dir`` relative to the job's working directory."""


RECENT_HOURS_MAX = 24 * 365 * 10
"""``recent_hours`` at most (ten years): a datetime cannot go back much further."""

TIMEOUT_S_MAX = 24 * 3600
"""Every timeout and deadline at most (a day): a longer one bounds nothing."""

FINITE = ConfigDict(allow_inf_nan=False)
"""The config's models take no inf or nan (TOML has both; ``timeout_s = inf`` is no bound)."""

PLACEHOLDERS = frozenset({"workdir", "name", "job_id", "user"})
"""What a root's ``{...}`` may name (``checkpoint_roots``, ``trial_roots``, the deep probe's
``rollout_dirs`` and ``validation_dirs``)."""
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def known_placeholders(templates: tuple[str, ...]) -> tuple[str, ...]:
    """The templates, if each names only known placeholders: the expander skips a template
    with an unknown one unread, so a typo must be a config error, not a silent no-op."""
    for root in templates:
        if _CONTROL.search(root):
            # a NUL or newline names no path: the login node's open() refused it, and the
            # collector stopped before every job of the sweep that listed it
            raise ValueError(f"{root!r}: a root holds a control character")
        unknown = sorted(set(_PLACEHOLDER.findall(root)) - PLACEHOLDERS)
        if unknown:
            raise ValueError(f"{root!r}: unknown placeholder {{{unknown[0]}}} (known: "
                             + " ".join(f"{{{p}}}" for p in sorted(PLACEHOLDERS)) + ")")
    return templates


USER_NAME = re.compile(r"[^\s,\x00-\x1f\x7f-][^\s,\x00-\x1f\x7f]*")
"""A user name as the scheduler takes it in ``-u`` (``alice``, ``svc.ml``, ``alice@corp``)."""


class _ClusterBase(Frozen):
    model_config = FINITE

    name: str
    """Shown in tables and taken by ``/job NAME:ID``: :data:`probes.ids.CLUSTER_NAME`."""
    active: StrictBool = True
    """``true`` or ``false`` (TOML's booleans; ``"yes"`` is a mistake, not a yes)."""
    users: tuple[str, ...] = ()
    """Whose jobs to report; empty means the SSH user (SLURM) or everyone selected (K8s)."""
    recent_hours: float = Field(24.0, ge=0, le=RECENT_HOURS_MAX)
    """How long an ended job stays in the report (at most ten years: ``inf`` or ``1e9`` made
    every sweep's sacct window overflow, the cluster unreachable)."""
    owners: dict[str, str] = Field(default_factory=dict)
    """This cluster's user -> Slack user id (checked by the bot's config loader)."""
    benign_patterns: tuple[str, ...] = ()
    checkpoint_roots: tuple[str, ...] = DEFAULT_CHECKPOINT_ROOTS
    trial_roots: tuple[str, ...] = DEFAULT_TRIAL_ROOTS
    timeout_s: float = Field(60.0, gt=0, le=TIMEOUT_S_MAX)
    """Wall-clock budget for this cluster's whole sweep."""
    tail_bytes: int = Field(1 << 20, gt=0)
    """Bytes of each log read per sweep (a bounded tail, never the whole file)."""
    min_log_lines: int = Field(1, ge=0)
    """A fetch returning fewer lines than this is retried once, then ``fetch-failed``."""

    @field_validator("name")
    @classmethod
    def _cluster_name(cls, v: str) -> str:
        # Said in words: pydantic's own message for a pattern quoted the regex.
        if not CLUSTER_NAME.match(v):
            raise ValueError(f"{v!r} is no cluster name (letters, digits, '_', '.' and '-', "
                             "at most 63, starting with a letter or digit)")
        return v

    @field_validator("checkpoint_roots", "trial_roots")
    @classmethod
    def _known_placeholders(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return known_placeholders(v)

    @field_validator("users")
    @classmethod
    def _user_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        # Each is an argv of squeue/sacct (joined with commas for sacct -u): a NUL crashed
        # the local runner and reset the SSH session, a comma named two users.
        for user in v:
            if not USER_NAME.fullmatch(user):
                raise ValueError(f"{user!r} is no user name (no spaces, commas or control "
                                 "characters, and no leading '-')")
        return v


class SlurmCluster(_ClusterBase):
    kind: Literal["slurm"] = "slurm"
    host: str | None = None
    port: Annotated[int, Field(strict=True, ge=1, le=65535)] = 22
    user: str | None = None
    known_hosts: str | None = None
    client_keys: tuple[str, ...] = ()
    local: StrictBool = False
    connect_timeout_s: float = Field(15.0, gt=0, le=TIMEOUT_S_MAX)
    command_timeout_s: float = Field(30.0, gt=0, le=TIMEOUT_S_MAX)
    read_timeout_s: float = Field(5.0, gt=0, le=TIMEOUT_S_MAX)
    """Deadline of each file open/read and each directory listing on the login node: a FIFO,
    a hung NFS file or a stuck listing costs that one job ``fetch-failed``, not the cluster."""
    answer_budget_bytes: int = Field(32 << 20, gt=0)
    """Most bytes the login node's collector answers with per sweep (default 32 MiB); jobs
    beyond it are reported ``fetch-failed`` with the reason (lower ``tail_bytes`` to fit more)."""
    max_output_bytes: int = Field(256 << 20, gt=0)
    """Most bytes one command may print (stdout and stderr together; never less than four
    times ``answer_budget_bytes``): a login node printing without end is stopped there and its
    cluster reported unreachable with the reason, instead of filling the bot's memory."""

    @model_validator(mode="after")
    def _host_or_local(self) -> SlurmCluster:
        if self.local == (self.host is not None):
            raise ValueError("set exactly one of host = \"...\" or local = true")
        return self


NAMESPACE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
"""A namespace name (RFC 1123 label): the only form the API server lets exist."""
_LABEL_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}"
_LABEL_VALUE = rf"(?:{_LABEL_NAME})?"
_REQUIREMENT = re.compile(
    rf"\s*(?:!\s*{_LABEL_KEY}|{_LABEL_KEY}(?:\s*(?:==|!=|=)\s*{_LABEL_VALUE}"
    rf"|\s*[<>]\s*-?\d+|\s+(?:in|notin)\s*\(\s*{_LABEL_VALUE}"
    rf"(?:\s*,\s*{_LABEL_VALUE})*\s*\))?)\s*")
"""One requirement of a label selector, as the API server parses it (``labels.Parse``):
``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a)``, ``k>3``."""
_SELECTOR = re.compile(rf"{_REQUIREMENT.pattern}(?:,{_REQUIREMENT.pattern})*")


class KubernetesCluster(_ClusterBase):
    kind: Literal["kubernetes"] = "kubernetes"
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    """The namespace read; none named: the kubeconfig context's, else ``default`` (kubectl's
    rule: the probe's client resolves it when it loads the kubeconfig)."""
    label_selector: str | None = None
    request_timeout_s: float = Field(20.0, gt=0, le=TIMEOUT_S_MAX)
    tail_lines: int = Field(2000, gt=0)
    user_keys: tuple[str, ...] = ("user", "owner", "team.user")
    """Job labels, then annotations, that name the job's owner (first present wins). Only when
    the config names them explicitly does the bot trust a label as the owner for permissions."""

    @field_validator("namespace")
    @classmethod
    def _namespace_name(cls, v: str | None) -> str | None:
        # A namespace that cannot exist lists no jobs, silently: the API answers it empty.
        if v is not None and not NAMESPACE_NAME.fullmatch(v):
            raise ValueError(f"{v!r} is no namespace name (lower-case letters, digits and '-', "
                             "at most 63, starting and ending alphanumeric)")
        return v

    @field_validator("label_selector")
    @classmethod
    def _selector_syntax(cls, v: str | None) -> str | None:
        if v is not None and v.strip() and not _SELECTOR.fullmatch(v):
            raise ValueError(f"{v!r} is no label selector (e.g. 'team=post-training', "
                             "'team in (a,b),!canary')")
        return v


class ReplayCluster(_ClusterBase):
    kind: Literal["replay"] = "replay"
    path: str


ClusterConfig = Annotated[
    SlurmCluster | KubernetesCluster | ReplayCluster, Field(discriminator="kind")
]


class ReadPlan(Frozen):
    """Where the deep probe looks and how much it may read (``[deep_probe]`` in the config)."""

    model_config = FINITE

    rollout_dirs: tuple[str, ...] = ("{workdir}/rollout_data", "{workdir}/rollouts",
                                     "{workdir}/exports")
    """verl ``trainer.rollout_data_dir`` and SkyRL ``trainer.export_path`` candidates."""
    validation_dirs: tuple[str, ...] = ("{workdir}/validation_data",)

    # Each at least 1 (0 or less read nothing, or, sliced from the end, everything).
    max_trials: int = Field(64, ge=1)
    max_listing: int = Field(20000, ge=1)
    max_files: int = Field(3, ge=1)
    max_lines: int = Field(64, ge=1)
    max_file_bytes: int = Field(1 << 20, ge=1)
    max_result_bytes: int = Field(64 << 20, ge=1)
    """A Harbor trial's result.json or trajectory.json is read whole up to this (a JSON
    document cut short reads as nothing; terminus-2's rollout details make it megabytes)."""
    max_text: int = Field(2000, ge=1)
    deadline_s: float = Field(20.0, gt=0, le=TIMEOUT_S_MAX)

    @field_validator("rollout_dirs", "validation_dirs")
    @classmethod
    def _known_placeholders(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return known_placeholders(v)
