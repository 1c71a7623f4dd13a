"""The generation engine: the ``Engine`` contract (``contract.py``) and its in-process
implementation (``generation.py``), composed of a KV cache with its scheduler (the rectangle,
``kvcache.py``; ``paged/``), a runner (the model's forward, ``fastpath/``, or a pipeline stage) and
the sampling (``sampling.py``, ``grammar.py``)."""
