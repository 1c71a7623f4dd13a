"""A workflow handler whose only node raises: the error must reach the client, naming the node."""


def boom(data, context):
    if data is None:
        return None
    body = data[0]["body"]
    raise ValueError("boom cannot take " + (body.decode() if isinstance(body, (bytes, bytearray)) else str(body)))
