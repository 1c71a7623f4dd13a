"""The paged KV cache with automatic prefix caching (docs/llm.md): ``pool.py`` (blocks, prefix
index), ``storage.py`` (tensors), ``parts.py`` / ``hf_cache.py`` (attention over blocks on the fast
forward / Hugging Face's), ``scheduler.py`` (``PagedKV``, ``paged_engine``)."""
