"""LLM serving: a continuous-batching generation engine for Hugging Face causal LMs.

Layers, each importing only those below it (docs/architecture.md):

* ``api/``: the request forms (TorchServe, OpenAI completions and chat, OIP generate): fields,
  sampling settings, tools, structured output, the answers' formats;
* ``process/``: the engine in a process of its own (``engine_process.EngineProcess``);
* ``engine/``: the ``Engine`` contract (``engine/contract.py``) and the in-process engine: its
  KV caches (rectangle, ``paged/``), scheduler, runners (``fastpath/``, pipeline stages), sampling;
* ``handler/``: what ``ts.torch_handler.llm_handler`` uses to choose and build an engine, its
  settings and metrics, a stateful model's conversations;
* ``params.py`` and ``guidance.py``: the value types and the llguidance loader every layer shares.

The tiny Llama of the tests, examples and benchmarks is built by ``ts.testing.tiny_llm`` (shipped,
never imported by the server).
"""
