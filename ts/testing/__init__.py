"""Helpers for tests, examples and benchmarks that ship with the package (nothing here is imported
by the server at run time): ``ts.testing.tiny_llm`` builds a tiny Llama and its tokenizer locally."""
