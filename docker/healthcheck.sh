#!/usr/bin/env bash
# The image's HEALTHCHECK: GET /ping on the inference address of the running server's config,
# with the inference key from key_file.json when token authorization is on (TorchServe's /ping
# needs it). Exit 0 only for {"status": "Healthy"}. Uses the same variables as entrypoint.sh.
set -euo pipefail

TS_HOME=${TS_HOME:-/home/model-server}
TS_CONFIG=${TS_CONFIG:-$TS_HOME/config.properties}
PYTHON=${PYTHON:-python3}

read -r url key < <("$PYTHON" - "$TS_CONFIG" "$TS_HOME/key_file.json" <<'PY'
import json, re, sys
address = "http://127.0.0.1:8080"
for line in open(sys.argv[1], encoding="utf-8"):
    m = re.match(r"\s*inference_address\s*[=:]\s*(\S+)", line)
    if m:
        address = m.group(1)
scheme, _, rest = address.partition("://")
host, _, port = rest.partition(":")
if host in ("0.0.0.0", "::", "[::]", ""):
    host = "127.0.0.1"
try:
    key = json.load(open(sys.argv[2], encoding="utf-8"))["inference"]["key"]
except (OSError, ValueError, KeyError):
    key = "-"
print(f"{scheme}://{host}" + (f":{port}" if port else ""), key)
PY
)
auth=()
[[ "$key" != "-" ]] && auth=(-H "Authorization: Bearer $key")
# -k: the health check asks this very server; an https:// address may serve a self-signed certificate
body=$(curl -fsS -k --max-time 8 "${auth[@]}" "$url/ping")
# 200 "Healthy" or "Partial Healthy" (serving with fewer workers than minWorkers); 500 "Unhealthy" fails above
[[ "$body" == *'Healthy"'* ]] || { echo "unhealthy: $body" >&2; exit 1; }
