#!/usr/bin/env bash
# Create the Python virtualenv $MILLPOND_VENV and install requirements-dev.txt
# (the tests' Python tools), or with --reader only requirements-reader.txt
# (DuckDB, the lake's reader: all the demo and the image build need; a
# twentieth of the full install's CPU, which would otherwise compete with
# the demo's cargo build). Idempotent: skips pip when the set's stamp
# matches the sha256 of its files; the full set includes the reader's.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

case "${1:-}" in
    "") set=dev files=(requirements-reader.txt requirements-dev.txt) ;;
    --reader) set=reader files=(requirements-reader.txt) ;;
    *) millpond_die "usage: setup-python.sh [--reader]" ;;
esac
req=$MILLPOND_ROOT/${files[-1]}
for f in "${files[@]}"; do
    [ -f "$MILLPOND_ROOT/$f" ] || millpond_die "$MILLPOND_ROOT/$f not found"
done
# The stamp of a set: the sha256 of its requirement files.
stamp_of() { (cd "$MILLPOND_ROOT" && cat "$@" | sha256sum | cut -d' ' -f1); }
stamp=$MILLPOND_VENV/.millpond-$set.sha256
want=$(stamp_of "${files[@]}")

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
"$MILLPOND_VENV/bin/python" - "$MILLPOND_DUCKDB_VERSION" "$set" <<'PY' || millpond_die "venv check failed"
import sys, duckdb
if sys.argv[2] == "dev":
    import pyarrow, boto3, moto, confluent_kafka, orjson, pyhoglake, yaml, helm_python, kubernetes_validate  # noqa: F401
    helm_python.helm_sdk_version()  # loads libhelm_c.so
if duckdb.__version__ != sys.argv[1]:
    sys.exit(f"python duckdb is {duckdb.__version__}, want {sys.argv[1]}")
PY
echo "$want" >"$stamp"
# The full set holds the reader's: --reader has nothing left to do.
if [ "$set" = dev ]; then
    stamp_of requirements-reader.txt >"$MILLPOND_VENV/.millpond-reader.sha256"
fi
