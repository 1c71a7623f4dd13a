"""Handler metrics (context.metrics), TorchServe's API, flushed as METRICS frames."""
