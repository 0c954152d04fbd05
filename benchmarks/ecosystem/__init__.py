"""The ecosystem check: lint pinned real projects from PyPI with this checkout's linter, and report
findings per rule, what changed since the committed snapshot, precision per rule over the committed
labels, and whether every fix keeps the code compiling, pyflakes-clean and stable.

`python -m benchmarks.ecosystem --help`; README.md ("The ecosystem check", under Development) says when to
run it and how to label findings.
"""
