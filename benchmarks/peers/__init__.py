"""The peer-suite check: TorchFix's and torch-preflight's own rule tests through this checkout's linter
(README.md beside this file)."""
