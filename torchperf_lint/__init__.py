"""torchperf-lint: find the PyTorch code that makes GPUs wait, and fix it."""

__version__ = "0.1.0"
