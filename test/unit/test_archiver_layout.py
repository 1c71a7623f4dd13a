"""What goes into an archive and where: handlers, extra files, skipped folders, tgz prefix."""

from __future__ import annotations

import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from model_archiver import ModelArchiver, ModelArchiverConfig
from model_archiver.artifacts import BUILTIN_HANDLERS, TSERVE_HANDLERS


def members(path: str) -> dict[str, bytes]:
    """Archive contents as {name: bytes} for any of the four formats."""
    p = Path(path)
    if p.is_dir():
        return {str(f.relative_to(p)).replace("\\", "/"): f.read_bytes() for f in p.rglob("*") if f.is_file()}
    if p.suffix == ".mar":
        with zipfile.ZipFile(p) as z:
            return {n: z.read(n) for n in z.namelist()}
    with tarfile.open(p) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}  # type: ignore[union-attr]


def archive(tmp_path: Path, **kw: object) -> str:
    fields: dict[str, object] = dict(model_name="net", version="1", export_path=str(tmp_path / "out"), force=True)
    fields.update(kw)
    return ModelArchiver.generate_model_archive(ModelArchiverConfig(**fields))  # type: ignore[arg-type]


def manifest(path: str) -> dict:
    content = members(path)
    key = next(k for k in content if k.endswith("MAR-INF/MANIFEST.json"))
    return json.loads(content[key])


@pytest.fixture
def src(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    monkeypatch.chdir(root)
    (root / "handler.py").write_text("def handle(data, context):\n    return data\n")
    return root


@pytest.mark.parametrize("name", BUILTIN_HANDLERS + TSERVE_HANDLERS)
def test_builtin_handlers_are_named_not_copied(src: Path, tmp_path: Path, name: str) -> None:
    out = archive(tmp_path, handler=name)
    assert list(members(out)) == ["MAR-INF/MANIFEST.json"]
    assert manifest(out)["model"]["handler"] == name


def test_builtin_handler_list_matches_torchserve() -> None:
    assert set(BUILTIN_HANDLERS) == {
        "base_handler", "text_classifier", "image_classifier", "object_detector", "image_segmenter",
        "dali_image_classifier", "vllm_handler", "trt_llm_handler",
    }


@pytest.mark.parametrize(
    ("arg", "in_manifest"),
    [
        ("handler.py", "handler.py"),
        ("handler", "handler"),
        ("handler:handle", "handler:handle"),
        ("handler.py:handle", "handler.py:handle"),
        ("{src}/handler.py:handle", "handler.py:handle"),
        ("{src}/handler", "handler"),
    ],
)
def test_handler_forms(src: Path, tmp_path: Path, arg: str, in_manifest: str) -> None:
    out = archive(tmp_path, handler=arg.format(src=src))
    assert set(members(out)) == {"handler.py", "MAR-INF/MANIFEST.json"}
    assert manifest(out)["model"]["handler"] == in_manifest


def test_lsp_handler_is_a_shared_library(src: Path, tmp_path: Path) -> None:
    (src / "libhandler.so").write_bytes(b"\x7fELF")
    out = archive(tmp_path, handler="libhandler", runtime="LSP")
    assert set(members(out)) == {"libhandler.so", "MAR-INF/MANIFEST.json"}
    assert manifest(out)["runtime"] == "LSP"
    assert list(members(archive(tmp_path, handler="BaseHandler", runtime="LSP"))) == ["MAR-INF/MANIFEST.json"]


@pytest.fixture
def assets(src: Path) -> Path:
    """A folder with files, a nested folder, and folders TorchServe leaves out."""
    a = src / "assets"
    (a / "vocab").mkdir(parents=True)
    (a / "labels.json").write_text("{}")
    (a / ".env").write_text("dotfiles are kept")
    (a / "vocab" / "words.txt").write_text("w")
    for skipped in ("__pycache__", "__MACOSX", ".git", "vocab/__pycache__", "vocab/.cache"):
        (a / skipped).mkdir(parents=True, exist_ok=True)
        (a / skipped / "junk.bin").write_text("x")
    (src / "extra.txt").write_text("e")
    return a


@pytest.mark.parametrize("fmt", ["default", "zip-store", "tgz", "no-archive"])
def test_extra_files_flat_and_filtered(src: Path, tmp_path: Path, assets: Path, fmt: str) -> None:
    out = archive(tmp_path, handler="handler.py", extra_files="assets,extra.txt", archive_format=fmt)
    prefix = "net/" if fmt == "tgz" else ""
    assert set(members(out)) == {
        prefix + n for n in (
            "handler.py", "labels.json", ".env", "vocab/words.txt", "extra.txt", "MAR-INF/MANIFEST.json"
        )
    }


def test_tgz_prefixes_every_entry(src: Path, tmp_path: Path, assets: Path) -> None:
    out = archive(tmp_path, handler="handler.py", extra_files=str(assets), archive_format="tgz")
    assert out.endswith("net.tar.gz")
    with tarfile.open(out, "r:gz") as t:
        names = t.getnames()
        assert all(n.startswith("net/") for n in names)
        assert all(m.isfile() for m in t.getmembers())
    assert "net/MAR-INF/MANIFEST.json" in names


def test_extra_files_globs_spaces_and_trailing_comma(src: Path, tmp_path: Path) -> None:
    for name in ("a.json", "b.json", "c.txt"):
        (src / name).write_text(name)
    out = archive(tmp_path, handler="handler.py", extra_files="*.json, c.txt,")
    assert set(members(out)) == {"handler.py", "a.json", "b.json", "c.txt", "MAR-INF/MANIFEST.json"}
    # a pattern matching nothing is only a warning, as in TorchServe
    assert set(members(archive(tmp_path, handler="handler.py", extra_files="*.nomatch"))) == {
        "handler.py", "MAR-INF/MANIFEST.json"}


def test_later_inputs_win_on_name_clash(src: Path, tmp_path: Path) -> None:
    (src / "x").mkdir()
    (src / "x" / "handler.py").write_text("# from extra files")
    out = archive(tmp_path, handler="handler.py", extra_files="x")
    assert members(out)["handler.py"] == b"# from extra files"


def test_an_extra_manifest_is_replaced_by_ours(src: Path, tmp_path: Path) -> None:
    (src / "old" / "MAR-INF").mkdir(parents=True)
    (src / "old" / "MAR-INF" / "MANIFEST.json").write_text('{"stale": true}')
    out = archive(tmp_path, handler="handler.py", extra_files="old")
    assert "stale" not in manifest(out)
    assert manifest(out)["model"]["modelName"] == "net"


def test_symlinked_inputs_are_stored_as_files(src: Path, tmp_path: Path) -> None:
    (src / "real.pt").write_bytes(b"real weights")
    (src / "link.pt").symlink_to(src / "real.pt")
    for fmt in ("default", "tgz", "no-archive"):
        out = archive(tmp_path, handler="handler.py", serialized_file="link.pt", archive_format=fmt)
        assert members(out)[("net/" if fmt == "tgz" else "") + "link.pt"] == b"real weights"
