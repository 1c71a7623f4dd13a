"""A module-level handle(): refused with preprocessWorkers > 0."""


def handle(data, context):
    return [1 for _ in data or []]
