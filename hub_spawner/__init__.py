"""JupyterHub integration: notebooks on scheduler-granted MIG slices, and the idle reaper.

Talks to the scheduler only through ``scheduler_core.client`` and the public model (DESIGN §2). ``ShoalSpawner``
is loaded on first use: the notebook job's own command (``python -m hub_spawner.launch``) must not pay for importing
JupyterHub before the server it starts even begins to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .spawner import ShoalSpawner

__all__ = ["ShoalSpawner"]


def __getattr__(name: str) -> Any:
    if name == "ShoalSpawner":
        from .spawner import ShoalSpawner
        return ShoalSpawner
    raise AttributeError(f"module 'hub_spawner' has no attribute {name!r}")
