"""Compatibility with TorchServe's own archiver, torch-model-archiver==0.12.0 from PyPI.

* For the same inputs, tserve's MANIFEST.json equals the real archiver's byte for byte
  except ``createdOn`` and ``archiverVersion``, and the archives hold the same members.
* Archives made by the real archiver load and answer in tserve.

The real archiver lives in a venv cached under ``.bench/archiver-0.12/`` (override with
``TSERVE_ARCHIVER_012_VENV``); it is installed from PyPI once and never pulls torch.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import requests

import harness
import model_archiver

REPO = Path(__file__).resolve().parents[2]
ARCHIVER_ROOT = Path(model_archiver.__file__).resolve().parents[1]
REAL_VERSION = "0.12.0"
VENV = Path(os.environ.get("TSERVE_ARCHIVER_012_VENV", REPO / ".bench" / "archiver-0.12"))


def _check_no_torch(venv: Path) -> None:
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.util as u; "
                           "print(u.find_spec('torch') is None)"], capture_output=True, text=True)
    assert site.stdout.strip() == "True", "the real archiver's venv must not contain torch"


def _install_real_archiver(venv: Path) -> Path:
    """Create the venv and pip-install the real archiver into it (idempotent, locked)."""
    what = f"torch-model-archiver=={REAL_VERSION} (needed to check compatibility)"
    bin_dir = harness.cached_venv(venv, [f"torch-model-archiver=={REAL_VERSION}"], what, finish=_check_no_torch)
    return bin_dir / "torch-model-archiver"


@pytest.fixture(scope="session")
def real_archiver() -> Path:
    return _install_real_archiver(VENV)


def run_real(exe: Path, args: list[str], cwd: Path) -> None:
    # A private TMPDIR: the real archiver stages in <tmp>/<model-name> and would collide.
    tmp = cwd / ".real-tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp))
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"real archiver failed: {proc.stderr}"


def run_ours(args: list[str], cwd: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ARCHIVER_ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "model_archiver", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"tserve archiver failed: {proc.stderr}"


def read_members(path: Path) -> dict[str, bytes]:
    if path.is_dir():
        return {f.relative_to(path).as_posix(): f.read_bytes() for f in path.rglob("*") if f.is_file()}
    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as t:
            return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}  # type: ignore[union-attr]
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def zip_methods(path: Path) -> set[int]:
    with zipfile.ZipFile(path) as z:
        return {i.compress_type for i in z.infolist()}


CREATED_ON = re.compile(r'"createdOn": "(\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2})"')
ARCHIVER_VERSION = re.compile(r'"archiverVersion": "([^"]*)"')


def normalized(manifest: str) -> str:
    assert CREATED_ON.search(manifest), manifest
    assert ARCHIVER_VERSION.search(manifest), manifest
    text = CREATED_ON.sub('"createdOn": "<time>"', manifest)
    return ARCHIVER_VERSION.sub('"archiverVersion": "<version>"', text)


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """One model's files, with the awkward cases: nested handler path, skipped folders."""
    src = tmp_path / "src"
    (src / "code").mkdir(parents=True)
    (src / "code" / "my_handler.py").write_text("def handle(data, context):\n    return data\n")
    (src / "model.py").write_text("class Net: pass\n")
    (src / "weights.pt").write_bytes(os.urandom(4096))
    (src / "requirements.txt").write_text("requests\n")
    (src / "model-config.yaml").write_text("minWorkers: 1\nmaxWorkers: 1\nbatchSize: 1\n")
    assets = src / "assets"
    (assets / "vocab" / "__pycache__").mkdir(parents=True)
    (assets / "vocab" / "words.txt").write_text("a b c")
    (assets / "vocab" / "__pycache__" / "x.pyc").write_bytes(b"pyc")
    (assets / "__MACOSX").mkdir()
    (assets / "__MACOSX" / "junk").write_text("junk")
    (assets / ".git").mkdir()
    (assets / ".git" / "HEAD").write_text("ref")
    (assets / "labels.json").write_text('{"0": "zero"}')
    (assets / ".hidden_file").write_text("kept by both")
    (src / "index.txt").write_text("index")
    return src


FULL = [
    "--model-name", "net", "--version", "1.0.0-rc1", "--serialized-file", "weights.pt",
    "--model-file", "model.py", "--handler", "code/my_handler.py", "--extra-files", "assets,index.txt",
    "--requirements-file", "requirements.txt", "--config-file", "model-config.yaml",
]
CASES = {
    "full-default": FULL,
    "full-zip-store": [*FULL, "--archive-format", "zip-store"],
    "full-tgz": [*FULL, "--archive-format", "tgz"],
    "full-no-archive": [*FULL, "--archive-format", "no-archive"],
    "builtin-handler": ["--model-name", "clf", "--version", "2", "--handler", "image_classifier",
                        "--serialized-file", "weights.pt"],
    "handler-function": ["--model-name", "fn.model", "--version", "1", "--handler", "code/my_handler:handle",
                         "--runtime", "python3"],
    "absolute-paths": ["--model-name", "abs", "--version", "1", "--handler", "{src}/code/my_handler.py",
                       "--serialized-file", "{src}/weights.pt", "--config-file", "{src}/model-config.yaml",
                       "--extra-files", "{src}/assets/labels.json"],
}
OUTPUTS = {"tgz": ".tar.gz", "no-archive": ""}


@pytest.mark.parametrize("case", list(CASES))
def test_same_manifest_and_members_as_torchserve(real_archiver: Path, inputs: Path, tmp_path: Path, case: str) -> None:
    args = [a.format(src=inputs) for a in CASES[case]]
    name = args[args.index("--model-name") + 1]
    fmt = args[args.index("--archive-format") + 1] if "--archive-format" in args else "default"
    output = name + OUTPUTS.get(fmt, ".mar")
    (tmp_path / "theirs").mkdir()  # TorchServe's archiver does not create the export path
    run_real(real_archiver, [*args, "--export-path", str(tmp_path / "theirs")], cwd=inputs)
    run_ours([*args, "--export-path", str(tmp_path / "ours")], cwd=inputs)

    theirs = read_members(tmp_path / "theirs" / output)
    ours = read_members(tmp_path / "ours" / output)
    assert sorted(ours) == sorted(theirs)
    manifest_key = next(k for k in theirs if k.endswith("MAR-INF/MANIFEST.json"))
    their_manifest, our_manifest = theirs.pop(manifest_key).decode(), ours.pop(manifest_key).decode()
    assert normalized(our_manifest) == normalized(their_manifest)
    assert ARCHIVER_VERSION.search(their_manifest).group(1) == REAL_VERSION  # type: ignore[union-attr]
    assert ours == theirs  # every other member, byte for byte
    if fmt in ("default", "zip-store"):
        assert zip_methods(tmp_path / "ours" / output) == zip_methods(tmp_path / "theirs" / output)


def test_same_existing_archive_error_as_torchserve(real_archiver: Path, inputs: Path, tmp_path: Path) -> None:
    args = ["--model-name", "dup", "--version", "1", "--handler", "image_classifier", "--export-path", str(tmp_path)]
    run_real(real_archiver, args, cwd=inputs)
    env = dict(os.environ, PYTHONPATH=str(ARCHIVER_ROOT))
    real_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    theirs = subprocess.run([str(real_archiver), *args], cwd=inputs, capture_output=True, text=True,
                            env={**real_env, "TMPDIR": str(tmp_path)}, timeout=120)
    ours = subprocess.run([sys.executable, "-m", "model_archiver", *args], cwd=inputs, capture_output=True,
                          text=True, env=env, timeout=120)
    assert theirs.returncode != 0 and ours.returncode != 0
    wording = f"{tmp_path / 'dup.mar'} already exists.\nPlease specify --force/-f option to overwrite"
    assert wording in theirs.stderr
    assert wording in ours.stderr


# ---- archives made by TorchServe's archiver, served by tserve ---------------------------------

HANDLER = (Path(__file__).resolve().parent / "handlers" / "greeting_handler.py").read_text()
SERVED = {
    # model name: (archive format, handler argument, made by)
    "real_mar": ("default", "handler:handle", "real"),
    "real_store": ("zip-store", "handler.py", "real"),
    "real_tgz": ("tgz", "handler", "real"),
    "real_dir": ("no-archive", "handler.py", "real"),
    "ours_mar": ("default", "handler.py:handle", "ours"),
    "ours_tgz": ("tgz", "handler.py", "ours"),
}


@pytest.fixture(scope="module")
def served(real_archiver: Path, tmp_path_factory: pytest.TempPathFactory):
    jar = REPO / "ts" / "frontend" / "tserve-frontend.jar"
    if not jar.exists():
        pytest.fail(f"{jar} is missing: build it with `gradle --offline -q packageJar`")
    root = tmp_path_factory.mktemp("served")
    src, store = root / "src", root / "store"
    src.mkdir()
    store.mkdir()
    (src / "handler.py").write_text(HANDLER)
    (src / "greeting.txt").write_text("hello")
    (src / "weights.bin").write_bytes(b"\x01" * 1234)
    (src / "model-config.yaml").write_text("minWorkers: 1\nmaxWorkers: 1\nbatchSize: 1\nmaxBatchDelay: 10\n")
    for name, (fmt, handler, maker) in SERVED.items():
        args = ["--model-name", name, "--version", "1.5", "--handler", handler, "--serialized-file", "weights.bin",
                "--extra-files", "greeting.txt", "--config-file", "model-config.yaml", "--archive-format", fmt,
                "--export-path", str(store)]
        (run_real(real_archiver, args, cwd=src) if maker == "real" else run_ours(args, cwd=src))
    with harness.Server(store) as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SERVED))
def test_archive_is_served_by_tserve(served, name: str) -> None:
    fmt = SERVED[name][0]
    url = name + {"default": ".mar", "zip-store": ".mar", "tgz": ".tar.gz", "no-archive": ""}[fmt]
    registered = served.register(url, initial_workers=1)
    assert registered.status_code == 200, registered.text
    answer = served.predict(name, data=b"world")
    assert answer.status_code == 200, answer.text
    assert answer.text == "hello world weights=1234 batch=1"
    described = requests.get(f"{served.management_url}/models/{name}", timeout=30).json()
    assert described[0]["modelName"] == name
    assert described[0]["modelVersion"] == "1.5"
