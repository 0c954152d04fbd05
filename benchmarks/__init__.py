"""The CUDA benchmark suite: one case per rule, each timing a bad variant against its fix.

`python -m benchmarks` runs it (see benchmarks/README.md). At run time the suite imports only torch,
the standard library and (for the chart) matplotlib: the GPU machine has no linter installed. The good
variants of fixable rules were produced by the linter's own fixer (`python -m benchmarks.generate`) and
are committed under benchmarks/generated/.
"""
