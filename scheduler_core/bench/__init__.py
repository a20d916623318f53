"""``shoal bench``: the figures in docs/BENCHMARKS.md, each printed with what produced it."""
