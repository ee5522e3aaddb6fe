#!/usr/bin/env bash
# Complete each image's root tree under <stage-root>/<image>, after
# build-binaries.sh put its binaries there (a RUN step of
# deploy/docker/Dockerfile; each image then copies its tree to /).
#
#   every image      /usr/local/bin/millpond-healthcheck (the HEALTHCHECK)
#   writer-ducklake  /usr/local/lib/libduckdb.so (scripts/setup-duckdb.sh) and
#                    /opt/duckdb-extensions/v<ver>/<platform>/<name>.duckdb_extension,
#                    exactly the extensions of writer/duckdb-extensions.txt for
#                    the pinned DuckDB (scripts/setup-extensions.sh, which
#                    needs the reader's venv: scripts/setup-python.sh
#                    --reader makes it first)
#
# What each image must then hold is checked in the built image
# (scripts/image/check-built.sh).
#
# Usage: stage.sh <stage-root>
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$MILLPOND_ROOT"

root=${1:-}
[ -n "$root" ] && [ $# -eq 1 ] || millpond_die "usage: stage.sh <stage-root>"
for image in ingest writer-ducklake writer-hoglake; do
    [ -d "$root/$image/usr/local/bin" ] || millpond_die "$root/$image/usr/local/bin missing: run scripts/image/build-binaries.sh $root first"
    install -D -m 0755 scripts/image/millpond-healthcheck "$root/$image/usr/local/bin/millpond-healthcheck"
done

bash scripts/setup-python.sh --reader
bash scripts/setup-duckdb.sh
bash scripts/setup-extensions.sh
dest=$root/writer-ducklake
install -D -m 0644 "$DUCKDB_LIB_DIR/libduckdb.so" "$dest/usr/local/lib/libduckdb.so"
platform=$(millpond_duckdb_platform)
from=$DUCKDB_EXTENSION_DIR/v$MILLPOND_DUCKDB_VERSION/$platform
to=$dest/opt/duckdb-extensions/v$MILLPOND_DUCKDB_VERSION/$platform
install -d "$to"
while read -r name _; do
    install -m 0644 "$from/$name.duckdb_extension" "$to/$name.duckdb_extension"
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' writer/duckdb-extensions.txt)
for image in ingest writer-ducklake writer-hoglake; do
    echo "stage: $image: $(du -sh "$root/$image" | cut -f1) in $root/$image" >&2
done
