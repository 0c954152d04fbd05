"""TPL5xx: data loading."""
