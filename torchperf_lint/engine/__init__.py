"""Parsing, the single walk, analysis (hot paths, names, tensors), running rules and fixing."""
