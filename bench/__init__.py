"""Benchmarks: `python3 bench/run.py` (see README)."""
