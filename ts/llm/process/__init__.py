"""The engine in a process of its own: ``engine_process.EngineProcess`` (the worker's side, an
``Engine``) and ``engine_core`` (the spawned process that runs the in-process engine)."""
