"""Reduce Harbor ``result.json`` files (trial and job) to the few fields the rules read.

Policy: STANDARD LIBRARY ONLY (``json``) and self-contained, with no ``from __future__``
import and only quoted annotations, because ``probes.remote.collector`` ships this module's source
to a SLURM login node and runs it there with whatever ``python3`` the node has (3.6 or newer);
a trial result.json can be large (agent messages), so it is reduced where it lies and only a
small dict crosses the wire. Nothing here raises on bad input: a malformed or truncated file
gives ``None``. Times stay the ISO strings Harbor wrote; they are parsed locally
(``probes.harbor``). A non-finite reward (``NaN``) is no reward. Layout and field names:
``research/formats.md`` §4.2-§4.3.
"""

import json
import math
import re

_TURN_KEYS = ("n_episodes", "rlm_trajectory_steps", "n_turns", "num_turns", "turns")
"""Where an agent counts its turns in ``agent_result.metadata``: terminus-2 and computer-1
(``n_episodes``), dspy-rlm (``rlm_trajectory_steps``, its REPL iterations). Every installed
agent counts them in its ATIF trajectory instead (``probes.remote.trajectory_turns``)."""
_STAT_KEYS = (
    ("n_completed", ("n_completed_trials", "n_trials")),
    ("n_errored", ("n_errored_trials", "n_errors")),
    ("n_running", ("n_running_trials",)),
    ("n_pending", ("n_pending_trials",)),
    ("n_cancelled", ("n_cancelled_trials",)),
    ("n_retries", ("n_retries",)),
)


def _load(raw: "str | bytes") -> "dict[str, object] | None":
    try:
        data = json.loads(raw)
    except (ValueError, TypeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


_AUTH_FAILURE = re.compile(
    r"\b401\b[^\n]{0,20}\bunauthori[sz]ed\b|\b403\b[^\n]{0,20}\bforbidden\b"
    r"|\bunauthori[sz]ed\b|\bauthentication (?:failed|error)\b"
    r"|\binvalid (?:api[ _-]?key|token|credentials)\b"
    r"|\bapi[ _-]?key not found\b|\btoken validation failed\b|\bunauthenticated\b"
    r"|\b(?:Agent)?AuthenticationError\b|\bPermissionDeniedError\b|\bAuthError\b",
    re.IGNORECASE,
)
"""A trial exception (type and message) that is an auth failure (the sandbox provider or the
model endpoint refusing credentials): the rulebook's "repeated auth failures". A bare number
is not one ("timed out after 403.0 seconds"). The providers' own words count: Daytona's
``Failed to create sandbox: API key not found``, Modal's ``AuthError`` / ``UNAUTHENTICATED:
Token validation failed``."""

_CONNECTION_TYPE = re.compile(
    r"^(?:APIConnectionError|APITimeoutError|ServiceUnavailableError|BadGatewayError"
    r"|ConnectError|ConnectTimeout|ConnectionError|ConnectionRefusedError"
    r"|ConnectionResetError|RemoteProtocolError|ServerDisconnectedError)$"
)
"""An exception type that is the model endpoint unreachable: LiteLLM's and the OpenAI client's
connection errors, httpx's and aiohttp's, Python's own."""

_LLM_CONNECTION_QUOTED = re.compile(
    r"\b(?:APIConnectionError|APITimeoutError|ServiceUnavailableError|BadGatewayError)\b"
    r"|^Connection error\.$"
)
"""The same quoted in the message of an agent that wraps it (``RuntimeError: litellm.
APIConnectionError: ...``), or the OpenAI client's own message: only the LLM client's names,
never a bare "Connection refused" (a task's own server, met by the agent's commands)."""

_HARBOR_TIMEOUTS = ("AgentTimeoutError", "AgentSetupTimeoutError", "VerifierTimeoutError",
                    "EnvironmentStartTimeoutError")
"""Harbor's own phase timeouts: never a connection failure, whatever their message quotes."""

_TRIAL_KEYS = ("trial_name", "task_name", "agent_result", "verifier_result", "exception_info")
"""Keys of a trial's ``result.json`` (``TrialResult``) that a job's (``JobResult``) never has."""


def is_trial_result(raw: "str | bytes") -> "bool | None":
    """Is this ``result.json`` a trial's (not a Harbor job's)? ``None`` when it is no JSON
    object (binary, cut off mid-write, nested past the parser): it tells neither."""
    data = _load(raw)
    if data is None:
        return None
    return any(key in data for key in _TRIAL_KEYS)


def _dict(value: "object") -> "dict[str, object]":
    return value if isinstance(value, dict) else {}


def _number(value: "object") -> "float | None":
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range is no count or reward
        return None
    return number if math.isfinite(number) else None


def _count(value: "object") -> "int | None":
    number = _number(value)
    if number is None or number < 0 or number != int(number):
        return None
    return int(number)


def _text(value: "object") -> "str | None":
    return value if isinstance(value, str) and value else None


NAME_CHARS = 200
"""The most of an exception type or an eval key carried: a class name and Harbor's
``{agent}__{model}__{dataset}`` are far shorter. A result.json is the job's user's file, so a
longer one (corrupt or hostile) is cut here: no string of a trial tree grows the answer with
its length (a 60 MB type once cost its job's entry the collector's whole answer budget)."""
TIME_CHARS = 64
"""The longest time string kept (Harbor's ISO times are 19-32 characters); a longer one is no
time at all."""


def _name(value: "object") -> "str | None":
    text = _text(value)
    return text[:NAME_CHARS] if text is not None else None


def _time(value: "object") -> "str | None":
    text = _text(value)
    return text if text is not None and len(text) <= TIME_CHARS else None


def _reward(rewards: "object") -> "float | None":
    """``rewards["reward"]``, else the numeric reward of the first key in sorted order
    (``reward.json`` is a flat dict): the key Harbor's ``Mean`` shows first for several keys
    (``aggregate_reward_dicts`` sorts them: ``Accuracy: 0.425``), whatever order the verifier
    wrote them in, so the pass-rate and the Mean read the same key."""
    rewards = _dict(rewards)
    if "reward" in rewards:
        return _number(rewards["reward"])
    for key in sorted(rewards, key=str):
        number = _number(rewards[key])
        if number is not None:
            return number
    return None


def _verifier_reward(verifier: "object") -> "float | None":
    """A ``verifier_result``'s reward: Harbor's ``rewards`` dict (``_reward``), or the one
    ``reward`` of ``sandboxes``, Harbor's predecessor (its ``VerifierResult`` until the rename,
    late 2025: ``{"reward": 1.0}``)."""
    verifier = _dict(verifier)
    if "rewards" in verifier:
        return _reward(verifier["rewards"])
    return _number(verifier.get("reward"))


def _trial_reward(data: "dict[str, object]") -> "float | None":
    if data.get("reward_valid") is False:
        # Harbor 0.26+: graded, but a recorded exception's error policy voids the reward (an
        # agent's ApiRateLimitError, a VerifierTimeoutError): its Mean counts the trial 0 live
        # and leaves it out at the end. Older results have no such field: rewards stand.
        return None
    reward = _verifier_reward(data.get("verifier_result"))
    if reward is not None:
        return reward
    # Multi-step trials (newer Harbor) score each step; the last scored step stands.
    steps = data.get("step_results")
    for step in reversed(steps if isinstance(steps, list) else []):
        reward = _verifier_reward(_dict(step).get("verifier_result"))
        if reward is not None:
            return reward
    return None


def _turns(agent: "dict[str, object]") -> "int | None":
    metadata = _dict(agent.get("metadata"))
    for source in (metadata, agent):
        for key in _TURN_KEYS:
            turns = _count(source.get(key))
            if turns is not None:
                return turns
    return None


def resumed_session(data: "dict[str, object]") -> bool:
    """The trial's steps resume one agent session (``config.agent.resume_trajectory``, Harbor
    0.26's ``harbor.trial.multi_step``): the agent dir is copied, not moved, to each step's
    ``steps/<step>/agent/`` and the next step continues the same native session, so each
    step's trajectory and agent context hold the turns of every step before it too."""
    agent = _dict(_dict(data.get("config")).get("agent"))
    return agent.get("resume_trajectory") is True


def _steps(data: "dict[str, object]") -> "list[dict[str, object]]":
    """A multi-step trial's ``step_results`` (newer Harbor), in step order."""
    steps = data.get("step_results")
    return [_dict(step) for step in steps] if isinstance(steps, list) else []


def _exception(data: "dict[str, object]") -> "dict[str, object]":
    """The trial's first recorded exception, as Harbor's ``recorded_exceptions`` orders them:
    the trial's own, then each step's (a multi-step trial records a step's on the step)."""
    for source in [data, *_steps(data)]:
        exception = _dict(source.get("exception_info"))
        if _text(exception.get("exception_type")) is not None:
            return exception
    return {}


def _agent_runs(
    data: "dict[str, object]",
) -> "tuple[int | None, int | None, int, str | None, str | None]":
    """``(turns, output tokens, agent runs, agent start, agent end)``: the trial's own agent
    result, else (a multi-step trial, whose own stays null) its steps', summed as Harbor sums
    their agent contexts (``compute_token_cost_totals``); each step that counted turns is one
    agent run, and the agent phase spans the steps'."""
    agent = _dict(data.get("agent_result"))
    execution = _dict(data.get("agent_execution"))  # TimingInfo of the agent's own run
    steps = _steps(data) if not agent else []
    if not steps:
        return (_turns(agent), _count(agent.get("n_output_tokens")), 1,
                _time(execution.get("started_at")), _time(execution.get("finished_at")))
    contexts = [_dict(step.get("agent_result")) for step in steps]
    turns = [t for t in (_turns(c) for c in contexts) if t is not None]
    if resumed_session(data) and turns:
        # each step's context holds the session's turns so far: the last is the whole
        turns = [max(turns)] + [0] * (len(turns) - 1)
    tokens = [n for n in (_count(c.get("n_output_tokens")) for c in contexts) if n is not None]
    timings = [_dict(step.get("agent_execution")) for step in steps]
    starts = [t for t in (_time(x.get("started_at")) for x in timings) if t is not None]
    ends = [t for t in (_time(x.get("finished_at")) for x in timings) if t is not None]
    return (sum(turns) if turns else None, sum(tokens) if tokens else None,
            max(len(turns), 1), starts[0] if starts else None, ends[-1] if ends else None)


_ENDPOINT_ENV = re.compile(
    r"^(?:[A-Z][A-Z0-9]*_)*API_BASE$|^(?:OPENAI|LLM|ANTHROPIC|HOSTED_VLLM|VLLM)_BASE_URL$")
"""The agent env's endpoint variables (as ``probes.logs.launch_checks`` reads them in a log):
LiteLLM's ``<PROVIDER>_API_BASE`` and the model clients' base URLs (openhands' ``LLM_BASE_URL``,
claude-code's ``ANTHROPIC_BASE_URL``), not any ``*_BASE_URL`` (``WANDB_BASE_URL``)."""


def _endpoint(agent: "dict[str, object]") -> "str | None":
    """The inference endpoint the trial's agent was pointed at, as its ``TrialConfig`` records
    it: ``agent.base_url`` (Harbor 0.26+), the agent's ``kwargs.api_base`` (terminus-2's
    ``--ak api_base=``) or ``kwargs.base_url``, else its ``env``'s base-URL variables."""
    kwargs, env = _dict(agent.get("kwargs")), _dict(agent.get("env"))
    named = [value for name, value in env.items() if _ENDPOINT_ENV.match(str(name))]
    for value in (agent.get("base_url"), kwargs.get("api_base"), kwargs.get("base_url"),
                  *named):
        if _text(value) is not None:
            return str(value)
    return None


_HEAVY_KEY = re.compile(rb'"rollout_details"\s*:\s*(?=[\[{])')
_VALUE_TOKEN = re.compile(rb'[^"\[\]{}]+|"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def _value_end(raw: bytes, pos: int) -> "int | None":
    """The end of the JSON array or object starting at ``pos``, skimmed (numbers and strings
    stepped over in runs, nothing built); ``None`` when it does not close."""
    depth = 0
    while True:
        token = _VALUE_TOKEN.match(raw, pos)
        if token is None:
            return None
        pos = token.end()
        first = raw[token.start():token.start() + 1]
        if first in (b"[", b"{"):
            depth += 1
        elif first in (b"]", b"}"):
            depth -= 1
            if depth == 0:
                return pos


def slim_result(raw: bytes) -> bytes:
    """A trial ``result.json`` with its ``rollout_details`` values replaced by ``null``,
    before parsing: terminus-2's ``collect_rollout_details`` records every turn's prompt token
    ids there (megabytes, tens of bytes of Python objects per byte parsed) and no rule reads
    them, so a large result costs its own size in memory, not several times it. A value that
    does not close leaves the text as it was (the parser then says what it is)."""
    parts: list[bytes] = []  # local annotations are never evaluated
    done = 0
    for key in _HEAVY_KEY.finditer(raw):
        if key.start() < done:
            continue  # inside a value already cut
        end = _value_end(raw, key.end())
        if end is None:
            return raw
        parts.extend((raw[done:key.end()], b"null"))
        done = end
    if not parts:
        return raw
    parts.append(raw[done:])
    return b"".join(parts)


def reduce_trial(raw: "str | bytes") -> "dict[str, object] | None":
    """A trial ``result.json`` reduced to reward, exception (and whether it is an auth or a
    connection failure), turns, output tokens and times (the trial's, and its ``agent_execution``
    phase's: instant-fail is judged on the agent). A multi-step trial's come from its steps;
    ``agent_runs`` (sent only above 1) says how many agent runs its turns span."""
    data = _load(raw)
    return reduce_trial_data(data) if data is not None else None


def reduce_trial_data(data: "dict[str, object]") -> "dict[str, object]":
    """``reduce_trial`` of a result.json already parsed (the deep probe's reader)."""
    exception = _exception(data)
    exc_type = _name(exception.get("exception_type"))
    message = (_text(exception.get("exception_message")) or "")[:2000]
    exc_text = f"{exc_type or ''} {message}"
    turns, tokens, runs, agent_start, agent_end = _agent_runs(data)
    out: dict[str, object] = {  # local annotations are never evaluated
        "reward": _trial_reward(data),
        "exception_type": exc_type,
        "n_turns": turns,
        "n_output_tokens": tokens,
        "started_at": _time(data.get("started_at")),
        "finished_at": _time(data.get("finished_at")),
        "agent_started_at": agent_start,
        "agent_finished_at": agent_end,
    }
    if runs > 1:
        out["agent_runs"] = runs  # only then: the usual record is unchanged on the wire
    if _steps(data) and resumed_session(data):
        out["resumed"] = True  # only then, as above: its step trajectories are cumulative
    endpoint = _endpoint(_dict(_dict(data.get("config")).get("agent")))
    if endpoint is not None:
        out["api_base"] = endpoint[:300]  # only then, as above
    if exc_type is not None and _AUTH_FAILURE.search(exc_text) is not None:
        out["auth_failure"] = True  # only then: the usual record is unchanged on the wire
    if exc_type is not None and exc_type not in _HARBOR_TIMEOUTS and (
            _CONNECTION_TYPE.match(exc_type) or _LLM_CONNECTION_QUOTED.search(message)):
        out["connection_failure"] = True  # only then, as above
    return out


EVAL_KEYS = 8
"""The most eval keys a job result.json's reduction carries (a job runs one agent and model on
one dataset, or a few)."""


def _eval_means(evals: "object") -> "dict[str, float]":
    """``evals[key].metrics[0].mean`` per eval key (the dataset's first metric), of the first
    ``EVAL_KEYS`` keys (``reduce_job``'s ``eval_keys``), each cut as they are."""
    means = {}
    for key, value in list(_dict(evals).items())[:EVAL_KEYS]:
        metrics = _dict(value).get("metrics")
        first = metrics[0] if isinstance(metrics, list) and metrics else None
        mean = _number(_dict(first).get("mean"))
        if mean is not None:
            means[str(key)[:NAME_CHARS]] = mean
    return means


def _job_metric(metrics: "object") -> "float | None":
    """``sandboxes``' job result (Harbor's predecessor) keeps its metrics at the top level,
    ``[{"name": "accuracy", "value": 0.42}]`` (its default metric a mean of the rewards, a
    missing one 0): the first one's value, unless it names an aggregate that is no mean."""
    first = _dict(metrics[0]) if isinstance(metrics, list) and metrics else {}
    if str(first.get("name", "")).lower() in ("max", "min", "sum"):
        return None
    return _number(first.get("value"))


def reduce_job(raw: "str | bytes") -> "dict[str, object] | None":
    """A job ``result.json`` reduced to totals, stats (old and new names) and eval means."""
    data = _load(raw)
    if data is None:
        return None
    stats = _dict(data.get("stats"))
    out: dict[str, object] = {  # local annotations are never evaluated
        "n_total_trials": _count(data.get("n_total_trials")),
        "started_at": _time(data.get("started_at")),
        "updated_at": _time(data.get("updated_at")),
        "finished_at": _time(data.get("finished_at")),
    }
    for name, keys in _STAT_KEYS:
        out[name] = next((_count(stats[k]) for k in keys if k in stats), None)
    means = _eval_means(stats.get("evals"))
    out["eval_means"] = means
    # "{agent}__{model}__{dataset}" (or "{agent}__{dataset}"): the Eval row's model × benchmark
    evals = list(_dict(stats.get("evals")))[:EVAL_KEYS]
    out["eval_keys"] = [str(key)[:NAME_CHARS] for key in evals]
    out["mean"] = next(iter(means.values()), None)
    if out["mean"] is None:
        out["mean"] = _job_metric(data.get("metrics"))
    return out
