"""Layer 3: the worker process that owns the device, and the parent-side evaluator that drives it."""
