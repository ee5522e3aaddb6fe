#!/usr/bin/env bash
# Query an embedded Millpond lake with plain DuckDB (the venv's duckdb), read
# only, while the writer keeps writing (SQLite catalog; a DuckDB-file catalog
# can only be read once the writer stopped). The lake is attached as `lake`
# and made the default, so tables need no prefix:
#
#   scripts/query-lake.sh "SELECT count(*) FROM events"
#   MILLPOND_LAKE_DIR=./millpond-lake scripts/query-lake.sh "DESCRIBE events"
#   scripts/query-lake.sh --value "SELECT count(*) FROM events"   # just 1234
#
# MILLPOND_LAKE_DIR defaults to the demo's lake ($MILLPOND_STATE/demo/lake).
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

[ $# -ge 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
lake=${MILLPOND_LAKE_DIR:-$MILLPOND_STATE/demo/lake}
[ -x "$MILLPOND_PYTHON" ] || millpond_die "$MILLPOND_PYTHON missing; run scripts/setup-python.sh"
if [ -f "$lake/catalog.sqlite" ]; then
    catalog=sqlite:$lake/catalog.sqlite
elif [ -f "$lake/catalog.ducklake" ]; then
    catalog=$lake/catalog.ducklake
else
    millpond_die "no catalog.sqlite or catalog.ducklake in $lake (set MILLPOND_LAKE_DIR)"
fi
mode=table
if [ "$1" = --value ]; then mode=value; shift; fi
exec "$MILLPOND_PYTHON" - "$mode" "$catalog" "$lake/data/" "$DUCKDB_EXTENSION_DIR" "$@" <<'PY'
import sys
import duckdb

mode, catalog, data, ext, *queries = sys.argv[1:]
con = duckdb.connect(config={"extension_directory": ext, "autoinstall_known_extensions": False})
con.execute("LOAD ducklake")
if catalog.startswith("sqlite:"):
    con.execute("LOAD sqlite_scanner")
con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{data}', READ_ONLY)")
con.execute("USE lake")
for q in queries:
    rel = con.sql(q)
    if rel is None:
        continue
    if mode == "value":
        row = rel.fetchone()
        print(row[0] if row else "")
    else:
        rel.show(max_rows=50)
PY
