"""Shoal's scheduler core: the model, the pure scheduling policy, and everything that applies its decisions.

Nothing in here imports ``hub_spawner``, ``magics`` or ``sweeps``; they reach the core through
:mod:`scheduler_core.client` and the public model types.
"""

__version__ = "0.1.0"
