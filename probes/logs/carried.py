"""The base of every carry model (a fold's state kept between two reads of one log), and the
fast way to build one from live state.

Policy: a carry is a frozen pydantic model stored as JSON (in Redis, by the bot's warm
sweeps: ``probes.slurm.cursors``), so its config keeps NaN and infinities, which metrics hold,
as strings. A fold snapshots every rule's state at every read, so :func:`built` makes a carry
from live state without validating it: the caller guarantees each field already has its
declared type, and the tests hold every snapshot to its validated round trip
(``tests/probes/logs/test_incremental.py``). The carries themselves live beside the state they
freeze: ``metric_carry``, ``fault_carry``, ``fingerprint_carry``.
"""

from __future__ import annotations

from collections.abc import Callable
from copy import copy
from functools import partial
from typing import Any, TypeVar

from pydantic import ConfigDict

from probes.models import Frozen


class Carried(Frozen):
    """A carry's model: JSON keeps NaN and infinities (as strings), which metrics hold."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")


_Model = TypeVar("_Model", bound=Carried)
_set = object.__setattr__


def built(cls: type[_Model], **fields: Any) -> _Model:
    """``cls(**fields)`` without validation, for a snapshot of live state whose every field
    already has its declared type (ints, floats, zone-aware log times, tuples, fresh dicts):
    the model validation would store, at a fraction of the cost for a model of many fields
    (a fold takes a snapshot of every rule per read). Fields not given take their defaults.
    The tests hold every snapshot to its validated round trip
    (``tests/probes/logs/test_incremental.py``)."""
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = _shape(cls)
    defaults, factories, private = shape
    values = {**defaults, **fields}  # the fields' declared order: the defaults' keys
    for name, factory in factories:
        if name not in fields:
            values[name] = factory()
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(fields))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", dict(private) if private is not None else None)
    return model


_Shape = tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...], dict[str, Any] | None]
_SHAPES: dict[type, _Shape] = {}


def _shape(cls: type[Carried]) -> _Shape:
    """(each field's default, in order; the fields made by a factory; private defaults)."""
    defaults: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    for name, field in cls.model_fields.items():
        factory = field.default_factory
        if factory is not None:
            defaults[name] = None
            factories.append((name, factory))  # type: ignore[arg-type]
        elif isinstance(field.default, dict | list | set):
            defaults[name] = None
            factories.append((name, partial(copy, field.default)))
        else:
            defaults[name] = field.default  # immutable: None, numbers, strings, tuples, models
    private = cls.__private_attributes__
    privates = {name: attr.get_default() for name, attr in private.items()} if private else None
    return defaults, tuple(factories), privates


