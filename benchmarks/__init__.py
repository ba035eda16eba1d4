"""Benchmarks: large multi-rank traces, and tracekit against HTA and the parse floor."""
