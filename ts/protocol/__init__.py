"""Wire protocol between the Java frontend and the Python backend worker (docs/protocol.md)."""
