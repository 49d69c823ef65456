"""``JOBTABLES_LOG_JSON=0`` switched JSON logs on (any non-empty value did)."""

from __future__ import annotations

import pytest

from bot.logs import json_logs


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("YES", True),
                                           ("on", True), ("0", False), ("false", False),
                                           ("no", False), ("off", False), ("", False)])
def test_the_variable_reads_as_a_boolean(value: str, on: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBTABLES_LOG_JSON", value)
    assert json_logs() is on


def test_unset_is_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBTABLES_LOG_JSON", raising=False)
    assert json_logs() is False
