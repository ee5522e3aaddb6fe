#!/usr/bin/env bash
# Create the Python virtualenv $MILLPOND_VENV and install requirements-dev.txt.
# Idempotent: skips pip when the stamp matches requirements-dev.txt's sha256.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

req=$MILLPOND_ROOT/requirements-dev.txt
[ -f "$req" ] || millpond_die "$req not found"
stamp=$MILLPOND_VENV/.millpond-requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)

if [ ! -x "$MILLPOND_VENV/bin/python" ]; then
    python=${MILLPOND_BASE_PYTHON:-python3}
    command -v "$python" >/dev/null || millpond_die "$python not found (set MILLPOND_BASE_PYTHON)"
    "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
        || millpond_die "$python is older than 3.10 (helm-python-sdk needs 3.10)"
    mkdir -p "$(dirname "$MILLPOND_VENV")"
    "$python" -m venv "$MILLPOND_VENV" || millpond_die "python3 -m venv failed (Debian: apt-get install python3-venv)"
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi

echo "setup-python: installing $req into $MILLPOND_VENV" >&2
rm -f "$stamp"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$MILLPOND_VENV/bin/python" -m pip install -q --upgrade pip >"$log" 2>&1 \
    || ! "$MILLPOND_VENV/bin/python" -m pip install -q -r "$req" >>"$log" 2>&1; then
    cat "$log" >&2
    millpond_die "pip install -r $req failed"
fi
"$MILLPOND_VENV/bin/python" - "$MILLPOND_DUCKDB_VERSION" <<'PY' || millpond_die "venv check failed"
import sys, duckdb, pyarrow, boto3, moto, confluent_kafka, orjson, pyhoglake, yaml, helm_python, kubernetes_validate  # noqa: F401
helm_python.helm_sdk_version()  # loads libhelm_c.so
if duckdb.__version__ != sys.argv[1]:
    sys.exit(f"python duckdb is {duckdb.__version__}, want {sys.argv[1]}")
PY
echo "$want" >"$stamp"
