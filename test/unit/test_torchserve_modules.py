"""The modules TorchServe users import (`ts.version`, `ts.arg_parser`, the archiver's API is in
test_archiver_torchserve_api.py) and the `torchserve -v` line that scripts parse."""

from __future__ import annotations

import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from unittest import mock

import pytest

import ts
from ts import model_server
from ts.arg_parser import ArgParser

# How scripts written for TorchServe read `torchserve --version` (its launcher prints
# "TorchServe Version is X"): a regular expression, awk's fourth field, and "the text after 'is '".
PARSERS = [
    lambda out: re.search(r"TorchServe Version is (\S+)", out).group(1),
    lambda out: out.split()[3],
    lambda out: out.split("TorchServe Version is ", 1)[1].split()[0],
]


def test_version_module() -> None:
    from ts.version import TORCHSERVE_VERSION, __version__

    assert __version__ == ts.__version__ == (Path(ts.__file__).parent / "version.txt").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", TORCHSERVE_VERSION)


@pytest.mark.parametrize("flag", ["-v", "--version"])
def test_version_line_is_parsed_like_torchserves(flag: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "ts.model_server", flag], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("TorchServe Version is ")
    assert f"tserve {ts.__version__}" in out
    from packaging.version import Version

    for parse in PARSERS:
        assert Version(parse(out)) >= Version("0.12.0")


def test_ts_parser_is_the_launchers() -> None:
    parser = ArgParser.ts_parser()
    args = parser.parse_args(["--start", "--ts-config", "c.properties", "--model-store", "s", "--models", "a=a.mar", "b.mar",
                              "--ncs", "--foreground", "--disable-token-auth", "--enable-model-api"])
    assert (args.start, args.ts_config, args.model_store, args.models) == (True, "c.properties", "s", ["a=a.mar", "b.mar"])
    assert args.ncs and args.foreground and args.disable_token_auth and args.enable_model_api
    assert parser.parse_args(["--dt", "--ppath", "p"]).plugins_path == "p"
    with pytest.raises(SystemExit):
        parser.parse_args(["--start", "--stop"])
    # the launcher parses with the same parser: a patched ts_parser is what `torchserve` reads
    with mock.patch.object(ArgParser, "ts_parser", return_value=mock.Mock(parse_args=lambda argv: Namespace(version=True))):
        assert model_server.main([]) == 0


def test_worker_args() -> None:
    args = ArgParser.extract_args(["--sock-type", "tcp", "--port", "9000", "--metrics-config", "m.yaml"])
    assert (args.sock_type, args.port, args.host, args.metrics_config) == ("tcp", 9000, "127.0.0.1", "m.yaml")
    assert ArgParser.model_service_worker_args().parse_args(["--sock-name", "/tmp/.ts.sock.9000"]).sock_type == "unix"
