"""Module-level handler (refused with preprocessWorkers > 0)."""


def handle(data, context):
    return data
