"""check-config refuses a Kubernetes namespace or label selector the API server cannot take.

Found writing a hostile config: ``namespace = "Bad_NS"`` and ``label_selector = "team in
(a,b"`` were 'OK'. A namespace that cannot exist is listed empty by the API (a silent empty
report, every sweep); a malformed selector made the cluster unreachable only at sweep time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main

K8S = '[[clusters]]\nname = "beta"\nkind = "kubernetes"\nkubeconfig = "KC"\n'


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str) -> tuple[int, str]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    path = tmp_path / "jobtables.toml"
    path.write_text(K8S.replace("KC", str(kubeconfig)) + line + "\n")
    code = main(["check-config", "--config", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("line", "where", "says"), [
    ('namespace = "Bad_NS"', ":5: clusters.0.namespace:", "'Bad_NS' is no namespace name"),
    ('namespace = "../kube-system"', ":5: clusters.0.namespace:", "is no namespace name"),
    ('label_selector = "team in (a,b"', ":5: clusters.0.label_selector:",
     "'team in (a,b' is no label selector"),
    ('label_selector = "a=b;rm -rf /"', ":5: clusters.0.label_selector:",
     "is no label selector"),
])
def test_bad_names_are_errors_by_line_and_key(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              line: str, where: str, says: str) -> None:
    """Exit 2, one line naming the file's line, the key and the value."""
    code, err = _check(tmp_path, capsys, line)
    assert code == 2
    assert where in err and says in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("line", [
    'namespace = "ml-team-1"',
    'label_selector = "team=post-training"',
    'label_selector = "team in (a, b),!canary,app.kubernetes.io/name!=x,env"',
    'label_selector = "example.com/tier notin (db),gen>3"',
])
def test_good_names_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str) -> None:
    """Namespaces and selectors of every form the API accepts still pass."""
    code, err = _check(tmp_path, capsys, line)
    assert code == 0, err
