#!/usr/bin/env bash
# Complete one image's root tree under <destdir>, after build-binaries.sh put
# its binaries there (a RUN step of deploy/docker/Dockerfile; the image then
# copies <destdir> to /, and scripts/check-images.sh runs the same command
# into a scratch root).
#
#   every image      /usr/local/bin/millpond-healthcheck (the HEALTHCHECK)
#   writer-ducklake  /usr/local/lib/libduckdb.so (scripts/setup-duckdb.sh) and
#                    /opt/duckdb-extensions/v<ver>/<platform>/<name>.duckdb_extension,
#                    exactly the extensions of writer/duckdb-extensions.txt for
#                    the pinned DuckDB (scripts/setup-extensions.sh, which
#                    needs the venv: scripts/setup-python.sh makes it first)
#
# Usage: stage.sh ingest|writer-ducklake|writer-hoglake <destdir>
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$MILLPOND_ROOT"

image=${1:-}
dest=${2:-}
case "$image" in
    ingest | writer-ducklake | writer-hoglake) ;;
    *) millpond_die "usage: stage.sh ingest|writer-ducklake|writer-hoglake <destdir>" ;;
esac
[ -n "$dest" ] || millpond_die "stage.sh $image: no destdir"
[ -d "$dest/usr/local/bin" ] || millpond_die "$dest/usr/local/bin missing: run scripts/image/build-binaries.sh $image $dest first"

install -D -m 0755 scripts/image/millpond-healthcheck "$dest/usr/local/bin/millpond-healthcheck"

if [ "$image" = writer-ducklake ]; then
    bash scripts/setup-python.sh
    bash scripts/setup-duckdb.sh
    bash scripts/setup-extensions.sh
    install -D -m 0644 "$DUCKDB_LIB_DIR/libduckdb.so" "$dest/usr/local/lib/libduckdb.so"
    platform=$(millpond_duckdb_platform)
    from=$DUCKDB_EXTENSION_DIR/v$MILLPOND_DUCKDB_VERSION/$platform
    to=$dest/opt/duckdb-extensions/v$MILLPOND_DUCKDB_VERSION/$platform
    install -d "$to"
    while read -r name _; do
        install -m 0644 "$from/$name.duckdb_extension" "$to/$name.duckdb_extension"
    done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' writer/duckdb-extensions.txt)
fi
echo "stage: $image: $(du -sh "$dest" | cut -f1) in $dest" >&2
