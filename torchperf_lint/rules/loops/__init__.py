"""TPL2xx: Python loops instead of tensor ops."""
