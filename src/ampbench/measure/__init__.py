"""Measurements: step timing, memory, FLOPs/MFU, max batch, convergence, inference latency, environment, hardware."""
