"""Behavioural conformance suite for session backends.

Three ways in, one catalogue of cases:

* ``run_conformance(adapter_factory, ...)`` returns a :class:`ConformanceReport`
  (the CLI's ``semvecctl conformance run`` renders it; ``write_junit_xml`` exports it);
* ``ConformanceSuite``, a mixin class for an author's own pytest suite (one pytest test
  per case, so a failure names the case);
* the ``pytest11`` plugin (``--semvec-conformance=...`` and a ``semvec_conformance``
  fixture).

Adapters are driven in their own convention (``drive``): ``owner_subject=`` or the
engine's ``scope=`` (read from the signatures), ``load`` as ``(blob, version)`` or bytes,
our event surface or the engine's. What a convention cannot express is not applicable,
never failed.

For plugin authors, optional declarations the suite reads (absent = the case is not
applicable, never passed):

* ``is_persistent = True`` on the adapter class, plus a factory: state and events must
  survive closing one adapter and opening another (``durability.survives_reopen``);
* ``fault_points`` / ``inject_fault(point)`` on the adapter (``contract.FaultSeam``;
  ``turn.after_state``, ``turn.cut_connection``): a turn failed there must leave the
  whole turn or nothing (see ``cases/durability.py``);
* ``idempotent_retries = True`` on the state store: a retried save whose exact result
  (blob, owner, pending, version) is already stored returns that version instead of a
  conflict (``state.identical_retry_is_idempotent``); declare it only if the store
  keeps a digest or can compare;
* ``assigns_sequences = False`` on an event store that keeps no per-user sequence (the
  engine's SQL layout): the sequence case is not applicable without trying. Undeclared,
  the suite looks at behaviour: events that read back without a sequence (0/None) make
  it not applicable, with that reason. No other case depends on listing order or
  sequence;
* ``health_details(timeout)`` (``contract.HealthDetails``): where it carries the Redis
  durability verdict, ``durability.server_is_durable`` judges it (AOF on, no evicting
  maxmemory-policy); without the seam the verdict is read from the run's Redis once the
  adapter's rows are seen there;
* ``delete(..., expected_version=)``: version-checked delete (``state.delete_checks_version``).

The cross-process cases (``concurrency.processes``, ``durability.sigkill``) need a
persistent adapter and a way to build it in a child process: an ``AdapterRecipe``
(``module:factory`` and JSON-able keyword arguments), which the CLI, the loader and the
pytest plugin make from what they were given, and ``run_conformance(recipe=...)`` or
``ConformanceSuite.conformance_recipe`` take from an author. ``faults.connection`` also
needs the recipe's URI (it points a second adapter at a loopback proxy). A
known-failures list (``load_known_failures``, ``run_conformance(known_failures=...)``)
turns listed failures into expected ones and listed passes into failures.

This package is imported by every pytest run through the plugin, so it imports nothing
until a name is used.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "run_conformance": "backends.conformance.runner",
    "run_case": "backends.conformance.runner",
    "plan": "backends.conformance.runner",
    "ConformanceOptions": "backends.conformance.context",
    "ConformanceReport": "backends.conformance.model",
    "CaseResult": "backends.conformance.model",
    "GroupResult": "backends.conformance.model",
    "Status": "backends.conformance.model",
    "Level": "backends.conformance.model",
    "CORE_GROUPS": "backends.conformance.model",
    "GROUP_ORDER": "backends.conformance.catalogue",
    "GROUP_DOCS": "backends.conformance.catalogue",
    "select_cases": "backends.conformance.catalogue",
    "to_junit_xml": "backends.conformance.junit",
    "write_junit_xml": "backends.conformance.junit",
    "load_adapter_factory": "backends.conformance.loader",
    "ConformanceSuite": "backends.conformance.suite",
    "AdapterRecipe": "backends.conformance.children",
    "load_known_failures": "backends.conformance.known",
    "parse_known_failures": "backends.conformance.known",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'backends.conformance' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
