"""Helpers shared by handlers (TorchServe-compatible import paths)."""
