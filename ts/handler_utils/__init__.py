"""Helpers for handlers (TorchServe import paths)."""
