"""Layer 1: the workload model, inputs, comparison, scoring and the run store (no CuPy, no Jupyter)."""
