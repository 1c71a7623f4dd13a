"""gRPC client stubs for tests: generated at test time from the project's protos (TorchServe
0.12's layout) with grpcio-tools, so the tests speak exactly what the server serves."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import grpc_tools

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO / "frontend" / "src" / "main" / "proto"


def compile_stubs(out: Path) -> SimpleNamespace:
    """inference_pb2(_grpc), management_pb2(_grpc) and ``empty`` (google.protobuf.Empty)."""
    wkt = Path(os.path.dirname(grpc_tools.__file__)) / "_proto"
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"-I{PROTO_DIR / 'third_party'}", f"-I{wkt}",
           f"--python_out={out}", f"--grpc_python_out={out}",
           "inference.proto", "management.proto", "google/rpc/status.proto"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    sys.path.insert(0, str(out))
    try:
        mods = {n: importlib.import_module(n) for n in
                ("inference_pb2", "inference_pb2_grpc", "management_pb2", "management_pb2_grpc")}
    finally:
        sys.path.remove(str(out))
    from google.protobuf import empty_pb2
    return SimpleNamespace(empty=empty_pb2.Empty, **mods)
