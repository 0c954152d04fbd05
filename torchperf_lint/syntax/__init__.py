"""The layer under the analysis: the single walk over a parsed file and the facts it records
(parents, scopes, bindings, import aliases, classes, functions, loops), and source positions."""
