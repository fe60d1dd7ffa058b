"""The benchmark harness: ``python -m benchmarks <scenario> [--quick] [--out DIR]``."""
