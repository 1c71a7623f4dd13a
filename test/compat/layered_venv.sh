#!/usr/bin/env bash
# Builds, once, a venv layered on PYTHON for running TorchServe's own tests: it sees everything
# PYTHON has (torch, tserve's dependencies) and adds torchvision, which many of TorchServe's
# handlers import and tserve does not need. torchvision goes in with --no-deps so pip never pulls
# a second torch; the build then checks that its pinned torch is PYTHON's.
#
#   test/compat/layered_venv.sh PYTHON DIR [PIP_INSTALL_ARGS...]
#
# TORCHVISION (default torchvision==0.28.0, the release whose wheel requires torch==2.13.0) names
# what to install; extra arguments go to `pip install` (e.g. --no-index --find-links DIR).
# DIR/bin gets python, torchserve, torch-model-archiver and torch-workflow-archiver: a server
# started from there runs its workers on DIR's python, so they see torchvision too.
set -euo pipefail
PY=${1:?usage: $0 PYTHON DIR [PIP_INSTALL_ARGS...]}
DIR=${2:?usage: $0 PYTHON DIR [PIP_INSTALL_ARGS...]}
shift 2
mkdir -p "$DIR" && DIR=$(cd "$DIR" && pwd)   # the console scripts' #! line needs an absolute path
TV=${TORCHVISION:-torchvision==0.28.0}
STAMP="$DIR/.layered-$(printf '%s' "$TV $PY" | cksum | cut -d' ' -f1)"
[ -f "$STAMP" ] && exit 0
rm -rf "$DIR"
"$PY" -m venv --system-site-packages "$DIR"
# --system-site-packages layers on the base interpreter only: when PYTHON is itself a venv its
# site-packages join through a .pth (addsitedir, so its own .pth files still apply)
PARENT=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
OWN=$("$DIR/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ "$PARENT" != "$OWN" ]; then
    printf 'import site; site.addsitedir(%s)\n' "$("$PY" -c 'import sys; print(repr(sys.argv[1]))' "$PARENT")" \
        > "$OWN/zz_layered_on.pth"
fi
"$DIR/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$@" "$TV"
"$DIR/bin/python" - <<'PY'
import re
import sys
from importlib import metadata

import torch

pins = [r for r in metadata.requires("torchvision") or [] if re.match(r"torch\b", r)]
want = [re.search(r"==\s*([^\s;,)]+)", p).group(1) for p in pins if "==" in p]
have = torch.__version__.split("+")[0]
if want and want[0] != have:
    sys.exit(f"torchvision {metadata.version('torchvision')} requires torch=={want[0]}, "
             f"the python it is layered on has torch {torch.__version__}: set TORCHVISION")
PY
for entry in torchserve=ts.model_server:start_cli \
        torch-model-archiver=model_archiver.model_packaging:generate_model_archive \
        torch-workflow-archiver=workflow_archiver.workflow_packaging:generate_workflow_archive; do
    name=${entry%%=*} target=${entry#*=}
    cat > "$DIR/bin/$name" <<PY
#!$DIR/bin/python
import sys
from ${target%%:*} import ${target#*:} as main
sys.exit(main())
PY
    chmod +x "$DIR/bin/$name"
done
touch "$STAMP"
