"""Module-level handler: handle(data, context), initialised with handle(None, context)."""

STATE = {}


def handle(data, context):
    if data is None:
        STATE["initialized"] = context.model_name
        return None
    return [f"{STATE['initialized']}:{row.get('body')}" for row in data]


def shout(data, context):
    if data is None:
        return None
    return [str(row.get("body")).upper() for row in data]


def modules(data, context):
    """Answers a JSON value (not bytes/str): has torch been imported, are the load's objects frozen."""
    import gc
    import sys

    if data is None:
        return None
    return [{"torch_imported": "torch" in sys.modules, "gc_frozen": gc.get_freeze_count() > 0} for _ in data]
