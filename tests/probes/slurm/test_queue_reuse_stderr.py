"""A queue whose jobs have StdErr files of their own (``sbatch -e``) is reused as any other.

The collector hands out a digest only when its signature listing (``squeue -O``) reads as the
document does. Once the document's specs carried a job's own StdErr, a listing without the
STDERR field never agreed: no digest, so a bot's every sweep printed ``squeue --json`` again
(found by ``test_queue_reuse``'s real-SLURM test failing while the jobtables user had
LLaMA-Factory jobs logging to ``%x-%j.err``), and a reused document would have lost the path.
"""

from __future__ import annotations

from pathlib import Path

from probes.slurm.answer import read_whole
from tests.probes.slurm.test_queue_reuse import _calls, _head, _request, _set_document
from tests.probes.slurm.test_stream import _shipped, world

TRACEBACK = "Traceback (most recent call last):\nRuntimeError: CUDA out of memory.\n"


def test_a_queue_with_own_stderr_files_is_reused_and_keeps_them(tmp_path: Path) -> None:
    squeue_bin, ids = world(tmp_path, 3)
    err = tmp_path / "logs" / f"err_{ids[0]}.log"
    err.write_text(TRACEBACK)
    _set_document(tmp_path, lambda jobs: jobs[0].update(
        standard_error=str(tmp_path / "logs" / "err_%j.log")))
    first = _shipped(_request(tmp_path, squeue_bin, ""), squeue_bin)
    digest = _head(first)["squeue"].get("digest")
    assert digest, _head(first)["squeue"]
    _calls(tmp_path)
    again = _shipped(_request(tmp_path, squeue_bin, digest), squeue_bin)
    assert [c for c in _calls(tmp_path) if "--json" in c] == []  # not printed again
    for lines in (first, again):
        answer = read_whole(lines).answer()
        assert answer is not None
        assert answer["jobs"][ids[0]]["log"]["stderr"]["text"] == TRACEBACK
        assert "stderr" not in answer["jobs"][ids[1]]["log"]
    # and a StdErr changed is a change of the queue
    _set_document(tmp_path, lambda jobs: jobs[1].update(standard_error="/elsewhere/e_%j.log"))
    head = _head(_shipped(_request(tmp_path, squeue_bin, digest), squeue_bin))
    assert "json" in head["squeue"] and head["squeue"]["digest"] != digest
