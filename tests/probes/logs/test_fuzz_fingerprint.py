"""The fingerprint and outcome readers never raise, and stay bounded, on hostile text."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.fingerprint import MAX_KEYS, MAX_VALUE, read_fingerprint
from probes.logs.outcome import read_outcome

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FRAGMENTS = [
    "(TaskRunner pid=1) {'actor_rollout_ref': {'model': {'path': 'Q'}, ",
    "'rollout': {'n': 8}}, 'data': {'train_batch_size': ",
    "inf}, ", "nan]", "[", "(", "'", '"', "\\", "}}}}", "{{{{",
    "GRPOConfig(\n", "num_generations=4,\n", ")\n", "Namespace(a=1, b='x', c=[1, 2]",
    "  tensor_model_parallel_size ........ 2\n", "trainer:\n", "  nnodes: 2\n", "  - item\n",
    "+ python -m x a.b=1 c.d=", "pyxis: importing docker image: ",
    "===== 2 passed in 1s =====", "upload: a to s3://", "https://huggingface.co/a/b/commit/",
    "pushing 1 rows -> ", "\n", "\r",
]


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=40), max_size=60))
def test_readers_never_raise(parts: list[str]) -> None:
    """Any mix of dump fragments gives a fingerprint or None, never an exception."""
    lines = "".join(parts).splitlines()
    fingerprint = read_fingerprint(lines)
    if fingerprint is not None:
        assert len(fingerprint.config) <= MAX_KEYS
        assert all(len(v) <= MAX_VALUE for v in fingerprint.config.values())
    read_outcome(lines)


def test_key_count_is_bounded() -> None:
    """A dump with more keys than the cap keeps only the cap."""
    body = "".join(f"  key_{i} ..... {i}\n" for i in range(MAX_KEYS + 50))
    fingerprint = read_fingerprint(body.splitlines())
    assert fingerprint is not None and len(fingerprint.config) == MAX_KEYS
