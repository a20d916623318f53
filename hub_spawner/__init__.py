"""JupyterHub integration: notebooks on scheduler-granted MIG slices, and the idle reaper.

Talks to the scheduler only through ``scheduler_core.client`` and the public model (DESIGN §2).
"""

from .spawner import ShoalSpawner

__all__ = ["ShoalSpawner"]
