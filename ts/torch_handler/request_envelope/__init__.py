"""Request envelopes: reshape requests before the handler and results after it."""
