"""The CUDA benchmark suite: one case per rule, each timing a bad variant against its fix.

`python -m benchmarks` runs it (see benchmarks/README.md). At run time the suite imports only torch,
the standard library, pillow and numpy (the JPEG and seed 004 pipeline cases, skipped without them) and
matplotlib (the chart): the GPU machine has no linter installed. The good
variants of fixable rules were produced by the linter's own fixer (`python -m benchmarks.generate`) and
are committed under benchmarks/generated/.
"""
