"""Run the shell blocks of a documentation page as a reader would, but on free 127.0.0.1 ports.

The blocks run in order as one `bash -euo pipefail` script, in a fresh folder that links every
top-level entry of the repository (so `examples/...`, `frontend/...`, `$PWD/model-archiver`
resolve as in a checkout, while what the commands write stays in the folder). The page's
addresses (`127.0.0.1:8080`, `:8081`, `:8082`, gRPC `:7070`, `:7071`) are rewritten to free ports,
and a `torchserve` shell function puts the same ports into whatever configuration the page starts
the server with (its own `--ts-config` file, or none), so the page's own keys still apply.
Whatever server the script leaves running is stopped when it exits.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import harness

FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```", re.S | re.M)
NOT_LINKED = {".git", ".venv", "model_store", "workflow_store", "logs", "demo", "build", "dist", "key_file.json", ".pytest_cache",
              ".coverage"}

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


def blocks(page: Path, languages: tuple[str, ...] = ("bash",)) -> list[tuple[str, str]]:
    """The page's fenced blocks in those languages, in order: (language, text)."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text()) if m.group(1) in languages]


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

    def script(self, page: Path, *, skip: tuple[str, ...] = (), python_env: str = "") -> str:
        """Bash blocks as they are, python blocks as `python -` here-documents (with `python_env` before)."""
        parts = [SHIM]
        for language, text in blocks(page, ("bash", "python") if python_env else ("bash",)):
            if any(s in text for s in skip):
                continue
            if language == "python":
                parts.append(f"{python_env} python - <<'DOC_PYTHON'\n{text}DOC_PYTHON\n")
            else:
                parts.append(text)
        return self.localize("\n".join(parts))

    def run(self, script: str, timeout: float) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("TS_CONFIG_FILE", "LOG_LOCATION", "METRICS_LOCATION")}
        env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", TMPDIR=str(self.tmp), HF_HUB_OFFLINE="1",
                   DOC_TMP=str(self.tmp), DOC_PORTS=str(self.ports))
        return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=timeout)


def squeezed(text: str) -> str:
    """Without any whitespace, to compare JSON however the server indented it."""
    return re.sub(r"\s+", "", text)
