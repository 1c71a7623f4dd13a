"""Creates the virtual environment of a model with ``useVenv: true`` in its model-config.yaml.

Run by the frontend at registration as ``<python> -m ts.utils.setup_model_venv <dir>`` with the
server's own interpreter. The venv gets no pip of its own (ensurepip takes seconds and needs no
network only by luck): instead a ``.pth`` file adds the server environment's site directories
*after* the venv's own, so torch, tserve and pip are importable while what the model's
requirements install into the venv shadows them. pip run from the venv installs into the venv,
and refuses to remove a server package ("outside environment") when a requirement pins another
version of it.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import venv

PTH_NAME = "_tserve_server_env.pth"


def server_site_dirs() -> list[str]:
    """The site directories of the interpreter running this module (the server's environment)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if os.path.isdir(d)]


def create(path: str) -> str:
    """Creates (or recreates) the venv at ``path``; returns its python executable."""
    venv.EnvBuilder(symlinks=os.name != "nt", with_pip=False, clear=True).create(path)
    purelib = sysconfig.get_path("purelib", vars={"base": path, "platbase": path})
    os.makedirs(purelib, exist_ok=True)
    # "import" lines of a .pth run at startup; addsitedir (unlike a plain path line) also
    # processes the .pth files there, which editable installs rely on.
    lines = [f"import site; site.addsitedir({d!r})\n" for d in server_site_dirs()]
    with open(os.path.join(purelib, PTH_NAME), "w", encoding="utf-8") as f:
        f.writelines(lines)
    return os.path.join(path, "Scripts" if os.name == "nt" else "bin", "python")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m ts.utils.setup_model_venv <venv directory>", file=sys.stderr)
        return 2
    print(f"created virtual environment {argv[0]} (python {create(argv[0])})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
