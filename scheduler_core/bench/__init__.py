"""Benchmarks behind ``shoal bench``: figures for docs/BENCHMARKS.md, printed, never asserted in tests."""
