"""The modules TorchServe users import (`ts.version`, `ts.arg_parser`, `model_archiver.model_packaging`'s
programmatic entry) and the `torchserve -v` line that scripts parse."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from argparse import Namespace
from pathlib import Path
from unittest import mock

import pytest

import ts
from model_archiver import model_packaging
from model_archiver.arg_parser import ArgParser as ArchiverArgParser
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


def _namespace(tmp_path: Path, **overrides: object) -> Namespace:
    handler = tmp_path / "handler.py"
    handler.write_text("def handle(data, context):\n    return data\n")
    fields = dict(model_name="patched", handler=str(handler), version="1.0", serialized_file=None, model_file=None,
                  extra_files=None, runtime="python", export_path=str(tmp_path / "out"), archive_format="default",
                  force=False, requirements_file=None, config_file=None)
    fields.update(overrides)
    return Namespace(**fields)


def test_generate_model_archive_reads_the_patched_parser(tmp_path: Path) -> None:
    """As TorchServe's own test suites drive the archiver: patch export_model_args_parser, call with no config."""
    parser = mock.Mock()
    parser.parse_args.return_value = _namespace(tmp_path)
    with mock.patch("model_archiver.model_packaging.ArgParser.export_model_args_parser", return_value=parser):
        assert model_packaging.generate_model_archive() is None
    with zipfile.ZipFile(tmp_path / "out" / "patched.mar") as mar:
        assert "MAR-INF/MANIFEST.json" in mar.namelist() and "handler.py" in mar.namelist()


def test_generate_model_archive_without_export_path_uses_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    parser = mock.Mock()
    parser.parse_args.return_value = _namespace(tmp_path, export_path=None, archive_format="no-archive")
    with mock.patch.object(model_packaging.ArgParser, "export_model_args_parser", return_value=parser):
        model_packaging.generate_model_archive()
    assert (tmp_path / "patched" / "MAR-INF" / "MANIFEST.json").is_file()


def test_generate_model_archive_error_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = mock.Mock()
    parser.parse_args.return_value = _namespace(tmp_path, serialized_file=str(tmp_path / "missing.pt"))
    with mock.patch("model_archiver.model_packaging.ArgParser.export_model_args_parser", return_value=parser):
        with pytest.raises(SystemExit) as exit_info:
            model_packaging.generate_model_archive()
    assert exit_info.value.code == 1
    assert "missing.pt" in capsys.readouterr().err


def test_export_model_args_parser_is_the_cli() -> None:
    assert model_packaging.ArgParser is ArchiverArgParser
    args = ArchiverArgParser.export_model_args_parser().parse_args(["--model-name", "m", "--version", "1", "--handler", "h.py"])
    assert (args.model_name, args.archive_format, args.runtime, args.force) == ("m", "default", "python", False)
