"""Helpers shared by the distributed base handlers (config checks, ranks, weights, helpers
for pipelining, tensor parallel, DeepSpeed and Accelerate)."""
