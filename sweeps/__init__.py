"""Optuna-backed hyper-parameter sweeps on Shoal (DESIGN §6).

* ``sweeps.trial``: the import-light helper trial code uses (params, report, finish).
* ``sweeps.SweepPanel``: the notebook widget that defines, launches and watches a sweep.
* ``sweeps.controller`` / ``sweeps.service``: the server-side controller that ``shoal up`` starts.

Names are loaded on first use, so ``from sweeps import trial`` in a trial job imports neither Optuna nor ipywidgets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .controller import SweepController
    from .panel import SweepPanel

_LAZY = {"SweepPanel": "sweeps.panel", "SweepController": "sweeps.controller"}

__all__ = ["SweepController", "SweepPanel"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sweeps' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
