"""Facts about one module that rules ask about: names and imports, hot paths, tensors and devices,
grad mode, loops, constants, constructors and the target torch version."""
