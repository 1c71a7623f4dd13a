"""LLM serving: a continuous-batching generation engine for Hugging Face causal LMs.

``ts.llm.engine`` holds the engine; ``ts.torch_handler.llm_handler`` serves it (TorchServe
style, OpenAI completions and chat completions, streamed or not); ``ts.llm.tiny`` builds a
tiny Llama and a local tokenizer for tests and examples.
"""
