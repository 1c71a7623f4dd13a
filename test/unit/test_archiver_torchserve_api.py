"""The archiver's Python API as TorchServe 0.12's own test suites drive it.

TorchServe's conftest loads ``model-archiver/model_archiver/model_packaging.py`` by path as a
module named ``archiver``, patches ``archiver.ArgParser.export_model_args_parser`` to return a
``ModelArchiverConfig`` and calls ``generate_model_archive()`` with no argument; its tests also
patch ``model_archiver.model_packaging_utils.zipfile.ZipFile`` and import ``RuntimeType`` from
``model_archiver.manifest_components.manifest``."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest

import model_archiver
from model_archiver import ModelArchiverConfig, model_packaging
from model_archiver.arg_parser import ArgParser
from model_archiver.manifest_components.manifest import RuntimeType


@pytest.fixture
def archiver() -> Iterator[ModuleType]:
    """model_packaging.py loaded on its own as ``archiver``, exactly as TorchServe's conftest does."""
    path = Path(model_archiver.__file__).parent / "model_packaging.py"
    loader = importlib.machinery.SourceFileLoader("archiver", str(path))
    spec = importlib.util.spec_from_loader("archiver", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["archiver"] = module
    loader.exec_module(module)
    yield module
    del sys.modules["archiver"]


def _config(tmp_path: Path, **overrides: object) -> ModelArchiverConfig:
    handler = tmp_path / "handler.py"
    handler.write_text("def handle(data, context):\n    return data\n")
    fields: dict[str, object] = dict(
        model_name="patched", handler=handler.as_posix(), version="1.0", serialized_file=None,
        model_file=None, extra_files=None, runtime=RuntimeType.PYTHON.value,
        export_path=tmp_path / "out", archive_format="default", force=False,
        requirements_file=None, config_file=None)
    fields.update(overrides)
    return ModelArchiverConfig(**fields)  # type: ignore[arg-type]


def test_patched_config_through_the_file_loaded_as_archiver(archiver: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    config = _config(tmp_path)
    stored = zipfile.ZipFile
    with mock.patch("archiver.ArgParser.export_model_args_parser", return_value=config), \
            mock.patch("model_archiver.model_packaging_utils.zipfile.ZipFile",
                       lambda x, y, _: stored(x, y, zipfile.ZIP_STORED)):
        assert archiver.generate_model_archive() is None
    with zipfile.ZipFile(tmp_path / "out" / "patched.mar") as mar:
        assert {"MAR-INF/MANIFEST.json", "handler.py"} <= set(mar.namelist())


def test_patched_config_through_the_package_module(tmp_path: Path) -> None:
    config = _config(tmp_path, archive_format="no-archive")
    with mock.patch("model_archiver.model_packaging.ArgParser.export_model_args_parser", return_value=config):
        model_packaging.generate_model_archive()
    assert (tmp_path / "out" / "patched" / "MAR-INF" / "MANIFEST.json").is_file()


def test_patched_config_error_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, serialized_file=str(tmp_path / "missing.pt"))
    with mock.patch("model_archiver.model_packaging.ArgParser.export_model_args_parser", return_value=config):
        with pytest.raises(SystemExit) as exit_info:
            model_packaging.generate_model_archive()
    assert exit_info.value.code == 1
    assert "missing.pt" in capsys.readouterr().err


def test_export_model_args_parser_returns_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["torch-model-archiver", "--model-name", "m", "--version", "1",
                                      "--handler", "h.py"])
    config = ArgParser.export_model_args_parser()
    assert isinstance(config, ModelArchiverConfig)
    assert (config.model_name, config.archive_format, config.runtime, config.force) == ("m", "default", "python", False)
    assert config.export_path == str(tmp_path)
