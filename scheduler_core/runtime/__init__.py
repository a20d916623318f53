"""Pieces of the controller that each do one thing: the usage ledger, straggler detection, per-gang tracking,
the snapshot builder and the event vocabulary. ``scheduler_core.controller`` wires them together."""
