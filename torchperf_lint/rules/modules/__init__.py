"""TPL4xx: model construction."""
