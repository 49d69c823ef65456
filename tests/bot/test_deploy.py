"""Deployment artefacts agree with the code: config loads, manifest and chart name what we serve."""

from __future__ import annotations

from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML comes with kubernetes_asyncio

from bot.config import load_config
from bot.server import EVENTS_PATH

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_example_config_is_valid() -> None:
    """deploy/jobtables.example.toml passes the same validation as a user's config."""
    config = load_config(DEPLOY / "jobtables.example.toml")
    assert {c.name for c in config.clusters} == {"alpha", "beta"}
    assert config.slack.owners["alice"].startswith("U")


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
    assert "--uid 10001" in docker and "USER jobtables" in docker
    assert "install -d -o jobtables -g jobtables /var/lib/jobtables/incidents" in docker
    assert "WORKDIR /var/lib/jobtables" in docker  # ./incidents resolves under it
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert "incidents:/var/lib/jobtables/incidents" in compose["services"]["bot"]["volumes"]
    chart = (DEPLOY / "helm" / "jobtables" / "templates" / "deployment.yaml").read_text()
    assert "runAsUser: 10001" in chart and "fsGroup: 10001" in chart
    assert "defaultMode: 0400" in chart
