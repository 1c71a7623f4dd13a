#!/usr/bin/env bash
# The image's entry point (TorchServe's dockerd-entrypoint.sh, run in the foreground):
#   serve [torchserve options...]   start tserve with $TS_HOME/config.properties and the model
#                                   store $TS_HOME/model-store; it stays attached, so the container
#                                   lives as long as the server and SIGTERM stops it gracefully
#   torchserve --start ...          as KServe's TorchServe runtime starts it: run in the foreground
#                                   (--foreground added), so the server is the container's process
#   anything else                   run that command instead (a shell, torch-model-archiver, ...)
# Outside a container (the test suite does this) the same variables point it elsewhere:
#   TS_HOME       working directory: config.properties, logs/, key_file.json (default: /home/model-server)
#   TS_CONFIG     config file (default: $TS_HOME/config.properties)
#   MODEL_STORE   model store (default: $TS_HOME/model-store)
#   TORCHSERVE    the torchserve command (default: torchserve from PATH)
set -euo pipefail

TS_HOME=${TS_HOME:-/home/model-server}
TS_CONFIG=${TS_CONFIG:-$TS_HOME/config.properties}
MODEL_STORE=${MODEL_STORE:-$TS_HOME/model-store}
TORCHSERVE=${TORCHSERVE:-torchserve}

if [[ "${1:-serve}" == "serve" ]]; then
  [[ $# -gt 0 ]] && shift
  cd "$TS_HOME"
  if [[ ! -f "$TS_CONFIG" ]]; then
    echo "entrypoint: config file $TS_CONFIG not found (set TS_CONFIG or mount one there)" >&2
    exit 1
  fi
  mkdir -p "$MODEL_STORE"
  # shellcheck disable=SC2086  # TORCHSERVE may be a command with arguments (python -m ts.model_server)
  exec $TORCHSERVE --foreground --ts-config "$TS_CONFIG" --model-store "$MODEL_STORE" "$@"
fi
if [[ "${1:-}" == "torchserve" && " $* " == *" --start "* && " $* " != *" --foreground "* ]]; then
  shift
  # shellcheck disable=SC2086
  exec $TORCHSERVE --foreground "$@"
fi
exec "$@"
