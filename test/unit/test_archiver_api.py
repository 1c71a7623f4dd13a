"""The Python API (ModelArchiverConfig / ModelArchiver) and the manifest it writes."""

from __future__ import annotations

import dataclasses
import json
import os
import tarfile
import zipfile
from datetime import datetime
from pathlib import Path

import pytest

import model_archiver
from model_archiver import ModelArchiver, ModelArchiverConfig, ModelArchiverError
from model_archiver.manifest import CREATED_ON_FORMAT
from model_archiver.model_packaging import generate_model_archive


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    src = tmp_path / "src"
    src.mkdir()
    files = {
        "handler": src / "my_handler.py",
        "weights": src / "weights.pt",
        "model": src / "model.py",
        "reqs": src / "requirements.txt",
        "config": src / "model-config.yaml",
    }
    files["handler"].write_text("def handle(data, context):\n    return data\n")
    files["weights"].write_bytes(b"\x00weights" * 100)
    files["model"].write_text("class Net: pass\n")
    files["reqs"].write_text("requests\n")
    files["config"].write_text("minWorkers: 1\nbatchSize: 4\n")
    return files


def full_config(inputs: dict[str, Path], export: Path, **overrides: object) -> ModelArchiverConfig:
    fields: dict[str, object] = dict(
        model_name="net",
        handler=str(inputs["handler"]),
        version="2.0",
        serialized_file=str(inputs["weights"]),
        model_file=str(inputs["model"]),
        requirements_file=str(inputs["reqs"]),
        config_file=str(inputs["config"]),
        export_path=str(export),
    )
    fields.update(overrides)
    return ModelArchiverConfig(**fields)  # type: ignore[arg-type]


def test_config_fields_match_torchserve_012() -> None:
    names = [f.name for f in dataclasses.fields(ModelArchiverConfig)]
    assert names == [
        "model_name", "handler", "version", "serialized_file", "model_file", "extra_files",
        "runtime", "export_path", "archive_format", "force", "requirements_file", "config_file",
    ]
    cfg = ModelArchiverConfig(model_name="m", handler="h.py", version="1")
    assert (cfg.serialized_file, cfg.model_file, cfg.extra_files) == (None, None, None)
    assert (cfg.runtime, cfg.archive_format, cfg.force) == ("python", "default", False)
    assert (cfg.requirements_file, cfg.config_file) == (None, None)


def test_export_path_defaults_to_cwd_at_construction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert ModelArchiverConfig(model_name="m", handler="h.py", version="1").export_path == str(tmp_path)


def test_generate_returns_path_and_writes_manifest(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = ModelArchiver.generate_model_archive(full_config(inputs, tmp_path / "out"))
    assert out == str(tmp_path / "out" / "net.mar")
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        raw = z.read("MAR-INF/MANIFEST.json").decode()
        assert z.read("weights.pt") == inputs["weights"].read_bytes()
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())
    assert names == {
        "my_handler.py", "weights.pt", "model.py", "requirements.txt", "model-config.yaml",
        "MAR-INF/MANIFEST.json",
    }
    manifest = json.loads(raw)
    assert list(manifest) == ["createdOn", "runtime", "model", "archiverVersion"]
    assert manifest["runtime"] == "python"
    assert manifest["archiverVersion"] == model_archiver.__version__
    datetime.strptime(manifest["createdOn"], CREATED_ON_FORMAT)
    assert list(manifest["model"].items()) == [
        ("modelName", "net"),
        ("serializedFile", "weights.pt"),
        ("handler", "my_handler.py"),
        ("modelFile", "model.py"),
        ("modelVersion", "2.0"),
        ("requirementsFile", "requirements.txt"),
        ("configFile", "model-config.yaml"),
    ]
    # json.dumps(indent=2), as TorchServe writes it
    assert raw == json.dumps(manifest, indent=2)


def test_minimal_manifest_has_only_set_keys(inputs: dict[str, Path], tmp_path: Path) -> None:
    cfg = ModelArchiverConfig(model_name="tiny", handler="image_classifier", version="1", export_path=str(tmp_path))
    out = ModelArchiver.generate_model_archive(cfg)
    with zipfile.ZipFile(out) as z:
        assert z.namelist() == ["MAR-INF/MANIFEST.json"]
        model = json.loads(z.read("MAR-INF/MANIFEST.json"))["model"]
    assert model == {"modelName": "tiny", "handler": "image_classifier", "modelVersion": "1"}


@pytest.mark.parametrize(
    ("fmt", "suffix"), [("default", ".mar"), ("zip-store", ".mar"), ("tgz", ".tar.gz"), ("no-archive", "")]
)
def test_every_format_via_api(inputs: dict[str, Path], tmp_path: Path, fmt: str, suffix: str) -> None:
    out = Path(ModelArchiver.generate_model_archive(full_config(inputs, tmp_path, archive_format=fmt)))
    assert out == tmp_path / f"net{suffix}"
    if fmt == "tgz":
        with tarfile.open(out) as t:
            manifest = json.load(t.extractfile("net/MAR-INF/MANIFEST.json"))  # type: ignore[arg-type]
    elif fmt == "no-archive":
        assert out.is_dir()
        manifest = json.loads((out / "MAR-INF" / "MANIFEST.json").read_text())
    else:
        with zipfile.ZipFile(out) as z:
            manifest = json.loads(z.read("MAR-INF/MANIFEST.json"))
            expected = zipfile.ZIP_STORED if fmt == "zip-store" else zipfile.ZIP_DEFLATED
            assert {i.compress_type for i in z.infolist()} == {expected}
    assert manifest["model"]["modelName"] == "net"


def test_api_raises_model_archiver_error(inputs: dict[str, Path], tmp_path: Path) -> None:
    cfg = full_config(inputs, tmp_path, serialized_file=str(tmp_path / "nope.pt"))
    with pytest.raises(ModelArchiverError, match=r"Serialized file not found: .*nope\.pt"):
        ModelArchiver.generate_model_archive(cfg)
    assert not (tmp_path / "net.mar").exists()


def test_existing_output_needs_force(inputs: dict[str, Path], tmp_path: Path) -> None:
    cfg = full_config(inputs, tmp_path)
    first = ModelArchiver.generate_model_archive(cfg)
    with pytest.raises(ModelArchiverError, match="already exists.\nPlease specify --force/-f option"):
        ModelArchiver.generate_model_archive(cfg)
    inputs["weights"].write_bytes(b"new weights")
    assert ModelArchiver.generate_model_archive(dataclasses.replace(cfg, force=True)) == first
    with zipfile.ZipFile(first) as z:
        assert z.read("weights.pt") == b"new weights"
    # No temporary files are left beside the archive.
    assert sorted(os.listdir(tmp_path)) == ["net.mar", "src"]


def test_module_level_generate_model_archive_with_config(inputs: dict[str, Path], tmp_path: Path) -> None:
    # TorchServe's function accepts a config too; with one it returns the path.
    assert generate_model_archive(full_config(inputs, tmp_path)) == str(tmp_path / "net.mar")


def test_export_path_is_created(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = ModelArchiver.generate_model_archive(full_config(inputs, tmp_path / "a" / "b"))
    assert Path(out).is_file()


@pytest.mark.parametrize("fmt", ["default", "tgz", "no-archive"])
def test_failed_write_leaves_nothing_behind(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    import errno

    from model_archiver import writers

    out = tmp_path / "out"
    cfg = full_config(inputs, out, archive_format=fmt)
    first = ModelArchiver.generate_model_archive(cfg)
    before = sorted(os.listdir(out))

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    # Every copy path (buffered loop, kernel copy, tarfile's copy) fails like a full disk.
    monkeypatch.setattr(writers, "copy_stream", disk_full)
    monkeypatch.setattr(writers, "copy_file", disk_full)
    monkeypatch.setattr(writers.tarfile, "copyfileobj", disk_full)
    with pytest.raises(ModelArchiverError, match="Failed to write .*No space left on device.*no archive was written"):
        ModelArchiver.generate_model_archive(dataclasses.replace(cfg, force=True))
    # The old output is untouched and no temporary file or folder is left.
    assert sorted(os.listdir(out)) == before
    assert Path(first).exists()
