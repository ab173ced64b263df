"""Benchmarks: scripts that print a table and compare with a baseline measured in the same run."""
