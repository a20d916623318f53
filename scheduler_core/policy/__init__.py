"""The pure scheduling policy: ``run_cycle(snapshot, now) -> CycleResult``. No I/O, no clock, no global random."""
