"""Warm worker starts (tserve's own, no TorchServe counterpart): ``zygote`` is the template process
workers are forked from, ``launch`` the stdlib-only stand-in the frontend runs per worker, ``spawn``
the ``torchserve`` launcher's start of the zygote before the JVM (docs/performance.md, "Warm starts")."""
