"""TPL7xx: precision and fused kernels."""
