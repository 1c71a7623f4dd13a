"""Run the shell and Python blocks of a documentation page as a reader would, but on free 127.0.0.1 ports.

The blocks run in order as one `bash -euo pipefail` script (a Python block as a `python -` here-document),
in a fresh folder that links every top-level entry of the repository (so `examples/...`, `frontend/...`,
`$PWD/model-archiver` resolve as in a checkout, while what the commands write stays in the folder). The
page's addresses (`127.0.0.1:8080`, `:8081`, `:8082`, gRPC `:7070`, `:7071`) are rewritten to free ports,
and a `torchserve` shell function puts the same ports into whatever configuration the page starts the
server with (its own `--ts-config` file, or none), so the page's own keys still apply. Whatever server
the script leaves running is stopped when it exits.

A block a test must not run (it needs a cluster, a container engine, a GPU or another machine, runs a
benchmark of minutes, or is a fragment of a file) is marked on the line just above its fence:
`<!-- illustrative: why -->` (invisible on GitHub and in the docs site); `<!-- illustrative: run by PAGE -->`
marks a block that shows commands another executed page runs (each line must be one of them). Every shell and Python block of
README.md, docs/ and examples/ is either marked so or on a page of EXECUTED_PAGES, whose test runs it;
test/unit/test_doc_blocks.py checks that, and that every fence names its language (`text` for output).
`python test/support/doc_commands.py` prints the counts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import harness

FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```", re.S | re.M)
ILLUSTRATIVE = re.compile(r"<!--\s*illustrative\b:?\s*([^>]*?)\s*-->[ \t]*\n$")
# An illustrative block whose reason is "run by PAGE, PAGE" (paths from its page's folder) shows commands
# those pages run: test_doc_blocks checks each of its command lines is one of theirs.
RUN_BY = re.compile(r"^run by ([^()]+?)(?:\s*\(|$)")
SHELL = ("bash", "sh", "shell", "console")
PYTHON = ("python", "py")
NOT_LINKED = {".git", ".venv", "model_store", "workflow_store", "logs", "demo", "build", "dist", "key_file.json", ".pytest_cache",
              ".coverage", "site"}

# Each page whose runnable blocks a test runs (repository-relative path -> the test, "file::function").
EXECUTED_PAGES = {
    "README.md": "test/integration/test_readme.py::test_readme_paths",
    "docs/batching.md": "test/integration/test_doc_commands.py::test_batching_page",
    "docs/pipelines.md": "test/integration/test_doc_commands.py::test_pipelines_page",
    "docs/workflows.md": "test/integration/test_doc_commands.py::test_workflows_page",
    "docs/kserve.md": "test/integration/test_doc_commands.py::test_kserve_page",
    "docs/grpc.md": "test/integration/test_doc_commands.py::test_grpc_page",
    "docs/llm.md": "test/integration/test_doc_commands.py::test_llm_page",
    "examples/llm/README.md": "test/integration/test_doc_commands.py::test_llm_example_page",
    "examples/pipeline/README.md": "test/integration/test_doc_commands.py::test_pipeline_example_page",
    **{f"examples/large_models/{page}": "test/integration/test_doc_commands.py::test_large_model_pages"
       for page in ("tp/README.md", "pippy/README.md", "accelerate/README.md", "deepspeed/README.md")},
}


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    line: int            # of the opening fence, 1-based
    illustrative: bool
    reason: str = ""     # the illustrative mark's text

    @property
    def runnable(self) -> bool:
        return self.language in SHELL + PYTHON and not self.illustrative


def page_blocks(page: Path) -> list[Block]:
    """Every fenced block of the page, in order."""
    source = page.read_text()
    found = []
    for m in FENCE.finditer(source):
        mark = ILLUSTRATIVE.search(source[: m.start()])
        found.append(Block(m.group(1), m.group(2), source.count("\n", 0, m.start()) + 1, bool(mark), mark.group(1) if mark else ""))
    return found


def command_lines(text: str) -> list[str]:
    """A shell block's commands, one per line: continuations joined, comments and blank lines left out,
    spaces squeezed."""
    joined = re.sub(r"\\\n\s*", " ", text)
    lines = (re.sub(r"(^|\s)#.*$", "", line) for line in joined.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def run_by(page: Path, block: Block) -> list[Path]:
    """The pages an illustrative block says run its commands ("run by a.md, b.md"), or []."""
    m = RUN_BY.match(block.reason)
    return [page.parent / name.strip() for name in m.group(1).split(",")] if m else []


def doc_pages(repo: Path = harness.REPO) -> list[Path]:
    """README.md, every page under docs/ and every README.md under examples/."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md")), *sorted((repo / "examples").rglob("README.md"))]


def blocks(page: Path, languages: tuple[str, ...] = SHELL) -> list[tuple[str, str]]:
    """The page's runnable blocks in those languages, in order: (language, text)."""
    return [(b.language, b.text) for b in page_blocks(page) if b.language in languages and not b.illustrative]


SHIM = r'''
torchserve() {
  local args=() cfg="" action=start
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --ts-config) cfg="$2"; shift 2 ;;
      --ts-config=*) cfg="${1#*=}"; shift ;;
      --stop|-v|--version) action=other; args+=("$1"); shift ;;
      *) args+=("$1"); shift ;;
    esac
  done
  if [[ $action == start ]]; then
    local merged="$DOC_TMP/ts-config-$RANDOM.properties"
    { if [[ -n "$cfg" ]]; then cat "$cfg"; echo; fi; cat "$DOC_PORTS"; } > "$merged"
    command torchserve --ts-config "$merged" "${args[@]}"
  else
    if [[ -n "$cfg" ]]; then args+=(--ts-config "$cfg"); fi
    command torchserve "${args[@]}"
  fi
}
trap 'command torchserve --stop >/dev/null 2>&1 || true' EXIT
'''


class DocRun:
    """One page's commands: `script()` builds the script, `run()` runs it and returns the result."""

    def __init__(self, tmp_path: Path) -> None:
        self.work = tmp_path / "work"
        self.work.mkdir()
        for entry in harness.REPO.iterdir():
            if entry.name not in NOT_LINKED and not entry.name.endswith(".egg-info"):
                (self.work / entry.name).symlink_to(entry)
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        config = harness.server_config(self.work / "model_store")
        keys = ("inference_address", "management_address", "metrics_address", "grpc_inference_address", "grpc_management_address",
                "grpc_inference_port", "grpc_management_port", "initial_worker_port", "initial_distribution_port")
        self.ports = harness.write_config(tmp_path / "ports.properties", {k: config[k] for k in keys})
        self.addresses = {
            "127.0.0.1:8080": config["inference_address"].removeprefix("http://"),
            "127.0.0.1:8081": config["management_address"].removeprefix("http://"),
            "127.0.0.1:8082": config["metrics_address"].removeprefix("http://"),
            "127.0.0.1:7070": f"127.0.0.1:{config['grpc_inference_port']}",
            "127.0.0.1:7071": f"127.0.0.1:{config['grpc_management_port']}",
        }

    def localize(self, text: str) -> str:
        for default, free in self.addresses.items():
            text = text.replace(default, free)
        return text

    def script(self, page: Path, *, python_env: str = "", setup: str = "", teardown: str = "") -> str:
        """The page's runnable blocks: shell as they are, Python as `python -` here-documents (with
        `python_env` before); `setup` first (what the page takes as done, e.g. a model served), `teardown` last."""
        parts = [SHIM, setup]
        for language, text in blocks(page, SHELL + PYTHON):
            if language in PYTHON:
                parts.append(f"{python_env} python - <<'DOC_PYTHON'\n{text}DOC_PYTHON\n")
            else:
                parts.append(text)
        parts.append(teardown)
        return self.localize("\n".join(parts))

    def run(self, script: str, timeout: float) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("TS_CONFIG_FILE", "LOG_LOCATION", "METRICS_LOCATION")}
        env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", TMPDIR=str(self.tmp), HF_HUB_OFFLINE="1",
                   DOC_TMP=str(self.tmp), DOC_PORTS=str(self.ports))
        return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=timeout)


def run_page(tmp_path: Path, page: Path, timeout: float = 600, **kw: str) -> tuple[DocRun, subprocess.CompletedProcess]:
    """Run the page's runnable blocks (DocRun.script's keywords); it must succeed and stop its server."""
    doc = DocRun(tmp_path)
    result = doc.run(doc.script(page, **kw), timeout)
    assert result.returncode == 0, f"{page.name}:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    assert "TorchServe has stopped." in result.stdout
    return doc, result


def squeezed(text: str) -> str:
    """Without any whitespace, to compare JSON however the server indented it."""
    return re.sub(r"\s+", "", text)


def counts(repo: Path = harness.REPO) -> tuple[int, int]:
    """(runnable, illustrative) shell and Python blocks over doc_pages()."""
    found = [b for page in doc_pages(repo) for b in page_blocks(page) if b.language in SHELL + PYTHON]
    return sum(b.runnable for b in found), sum(b.illustrative for b in found)


if __name__ == "__main__":
    runnable, illustrative = counts()
    print(f"{runnable} runnable, {illustrative} illustrative shell and Python blocks in README.md, docs/ and examples/")
    sys.exit(0)
