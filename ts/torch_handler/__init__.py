"""Base and default handlers (TorchServe-compatible names)."""
