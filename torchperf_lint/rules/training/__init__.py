"""TPL3xx: the training step and the optimizer."""
