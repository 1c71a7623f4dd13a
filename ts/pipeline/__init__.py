"""How a worker runs batches: inline (sync) or through the preprocess pool."""
