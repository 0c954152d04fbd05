"""The machinery above the analysis: the rule context, running rules over the walk, noqa,
findings, fixing and edits."""
