"""TPL6xx: debugging and profiling left on."""
