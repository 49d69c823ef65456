"""The sandbox's api_base under the names Harbor's agents read it from.

Harbor resolves an agent's inference endpoint from the environment: terminus-2 through
LiteLLM's per-provider ``<PROVIDER>_API_BASE`` (``HOSTED_VLLM_API_BASE`` for a
``hosted_vllm/`` model), the installed agents from their own variables (openhands
``LLM_BASE_URL``, ``HOSTED_VLLM_API_BASE``, ``VLLM_API_BASE``; claude-code
``ANTHROPIC_BASE_URL``), passed with ``--ae KEY=VALUE`` or exported by the launch script. An
eval launched with ``export HOSTED_VLLM_API_BASE=http://<node IP>:8000/v1`` (echoed by
``set -x``) read ``api?`` and no flag: only ``api_base``, ``OPENAI_BASE_URL`` and
``OPENAI_API_BASE`` were read. A URL that is no model endpoint (W&B's ``WANDB_BASE_URL``, the
HF hub's ``HF_ENDPOINT``) is no api_base.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from probes.remote.harbor_reduce import reduce_trial
from report.models import JobDetail
from tests.report.factories import NOW, judge, log, record

INTERNAL = "http://10.52.3.17:8000/v1"


def _launched(line: str) -> JobDetail:
    """An eval five minutes into its run whose launch log holds ``line``."""
    text = line + "\n"
    return judge(JobFacts(record=record("eval-qwen3-x-tbench", start_time=NOW - timedelta(
        minutes=5), elapsed_s=300), log=log(text=text), summary=parse_log(text)))


@pytest.mark.parametrize("line", [
    f"+ export HOSTED_VLLM_API_BASE={INTERNAL}",
    f"HOSTED_VLLM_API_BASE={INTERNAL}",
    f"+ harbor run -d terminal-bench@2.0 -a openhands -m hosted_vllm/Qwen3-32B "
    f"--ae LLM_BASE_URL={INTERNAL} --n-concurrent 16",
    f"+ export VLLM_API_BASE={INTERNAL}",
    "+ export ANTHROPIC_BASE_URL=http://litellm-proxy:4000",
    f"openai_api_base: {INTERNAL}",
])
def test_an_internal_endpoint_under_an_agent_env_name_is_flagged(line: str) -> None:
    detail = _launched(line)
    assert "api-base-internal" in detail.report.flags, (line, detail.report.flags)
    assert detail.infra is not None and "api✗" in detail.infra


@pytest.mark.parametrize("line", [
    "+ export HOSTED_VLLM_API_BASE=https://eval-engine.example.org/v1",
    "+ export WANDB_BASE_URL=http://10.0.0.9:8080",
    "+ export HF_ENDPOINT=http://10.0.0.3:5564",
])
def test_a_public_endpoint_or_no_model_endpoint_is_not_flagged(line: str) -> None:
    assert "api-base-internal" not in _launched(line).report.flags


@pytest.mark.parametrize("name", ["LLM_BASE_URL", "VLLM_API_BASE", "ANTHROPIC_BASE_URL",
                                  "HOSTED_VLLM_API_BASE"])
def test_the_trial_configs_agent_env_names_its_endpoint(name: str) -> None:
    """An installed agent's endpoint as the trial's recorded ``config.agent.env`` holds it."""
    raw = json.dumps({"trial_name": "t", "config": {"agent": {
        "name": "openhands", "kwargs": {}, "env": {"LLM_API_KEY": "x", name: INTERNAL}}}})
    reduced = reduce_trial(raw)
    assert reduced is not None and reduced.get("api_base") == INTERNAL


def test_a_wandb_url_in_the_agent_env_is_no_endpoint() -> None:
    raw = json.dumps({"trial_name": "t", "config": {"agent": {
        "name": "openhands", "kwargs": {}, "env": {"WANDB_BASE_URL": INTERNAL}}}})
    reduced = reduce_trial(raw)
    assert reduced is not None and "api_base" not in reduced

