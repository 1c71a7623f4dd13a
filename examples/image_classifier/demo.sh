#!/usr/bin/env bash
# `make demo`: archive the tiny image classifier, start tserve, ask for one prediction, stop.
# INFERENCE_URL and TS_CONFIG_FILE may point the demo at other ports (the test suite does).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
WORK=${DEMO_DIR:-demo}
URL=${INFERENCE_URL:-http://127.0.0.1:8080}
mkdir -p "$WORK/model_store"
python examples/image_classifier/build_mar.py --export-path "$WORK/model_store" >/dev/null
python examples/image_classifier/make_png.py "$WORK/image.png"
trap 'torchserve --stop >/dev/null' EXIT
LOG_LOCATION="$WORK/logs" torchserve --start --ncs --disable-token-auth \
  --model-store "$WORK/model_store" --models tiny_cnn=tiny_cnn.mar >"$WORK/start.log" || { cat "$WORK/start.log"; exit 1; }
echo "Prediction for $WORK/image.png:"
curl -sS --fail-with-body -X POST "$URL/predictions/tiny_cnn" -T "$WORK/image.png"
echo
