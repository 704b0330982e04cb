"""GPU support (placeholder until the GPU path lands)."""
