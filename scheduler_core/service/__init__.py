"""The long-running service pieces the composition root (``shoal up``) wires together: the live controller loop,
the scheduler-only process runner, and node administration."""
