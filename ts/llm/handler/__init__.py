"""What ``ts.torch_handler.llm_handler`` uses besides the engine: its settings, the choice of
engine, its metrics and a stateful model's conversations."""
