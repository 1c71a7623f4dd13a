"""LLM serving: a continuous-batching generation engine for Hugging Face causal LMs.

``ts.llm.engine`` holds the engine; ``ts.torch_handler.llm_handler`` serves it (TorchServe
style, OpenAI completions and chat completions, streamed or not). The tiny Llama of the tests,
examples and benchmarks is built by ``ts.testing.tiny_llm`` (shipped, never imported by the server).
"""
