"""Benchmarks: one command each, printing a table and writing JSON to benchmarks/out/."""

__all__: list[str] = []
