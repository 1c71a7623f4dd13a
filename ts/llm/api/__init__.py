"""The LLM request forms: parse and check a request, format its answers (no engine types:
``ts/llm/params.py`` holds the values the engine and this layer share)."""
