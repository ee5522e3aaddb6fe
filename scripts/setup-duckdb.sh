#!/usr/bin/env bash
# Put DuckDB's own prebuilt shared library (libduckdb.so, the release build
# of v$MILLPOND_DUCKDB_VERSION with parquet and json built in) into
# $DUCKDB_LIB_DIR, which the build links against (see build-support/).
#
# It comes from the npm package @duckdb/node-bindings-linux-<arch>, fetched
# with `npm pack` and checked against the sha512 integrity pinned below and
# against the one the registry publishes. Idempotent: a library already in
# place with the same pinned integrity is kept. Needs npm and python3 (the
# system's: only its standard library, so no venv has to come first).
#
# The opt-in cargo feature `bundled` compiles DuckDB from source instead
# (about 25 min on 2 cores) for platforms without a prebuilt library.
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

npm_version=$MILLPOND_DUCKDB_VERSION-r.5
case "$(uname -s)/$(uname -m)" in
    Linux/x86_64)
        pkg=@duckdb/node-bindings-linux-x64
        integrity=sha512-kCyq6BXhn6QXfwF8yVdVKriSSHP+rfVWcJ56cG8qZzlOZpxyvT5WGm6jMshxg4ditLlOsHsIN/D47RYrcjXuHQ==
        ;;
    Linux/aarch64)
        pkg=@duckdb/node-bindings-linux-arm64
        integrity=sha512-CafH2AIvXtpwDynG3KB/4uEOHRGlFoB7auCRMIwH3BKNIobsANV5LSpDJ3tfyRCFIsK6e8AT1eseWVnu2Dv3cw==
        ;;
    *) millpond_die "no prebuilt DuckDB for $(uname -s)/$(uname -m); build with the cargo feature bundled (see docs/getting-started.md)" ;;
esac

dest=$DUCKDB_LIB_DIR
stamp=$dest/.integrity
if [ -s "$dest/libduckdb.so" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$integrity" ]; then
    exit 0
fi
command -v npm >/dev/null || millpond_die "npm not found; run scripts/setup-system.sh"
command -v python3 >/dev/null || millpond_die "python3 not found; run scripts/setup-system.sh"

mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "setup-duckdb: fetching $pkg@$npm_version (libduckdb.so, DuckDB v$MILLPOND_DUCKDB_VERSION)" >&2
published=$(cd "$tmp" && npm view "$pkg@$npm_version" dist.integrity 2>"$tmp/npm.log") ||
    { cat "$tmp/npm.log" >&2; millpond_die "npm view $pkg@$npm_version failed"; }
[ "$published" = "$integrity" ] ||
    millpond_die "the registry publishes integrity $published for $pkg@$npm_version, this script pins $integrity"
(cd "$tmp" && npm pack --silent "$pkg@$npm_version" >npm.out 2>"$tmp/npm.log") ||
    { cat "$tmp/npm.log" >&2; millpond_die "npm pack $pkg@$npm_version failed"; }
tarball=$(find "$tmp" -maxdepth 1 -name '*.tgz' | head -n1)
[ -n "$tarball" ] || millpond_die "npm pack produced no tarball"
actual=$(python3 -c 'import base64, hashlib, sys; print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tarball")
[ "$actual" = "$integrity" ] || millpond_die "$tarball has integrity $actual, expected $integrity"

tar -xzf "$tarball" -C "$tmp" package/libduckdb.so
python3 - "$tmp/package/libduckdb.so" "v$MILLPOND_DUCKDB_VERSION" <<'PY' ||
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.duckdb_library_version.restype = ctypes.c_char_p
got = lib.duckdb_library_version().decode()
if got != sys.argv[2]:
    sys.exit(f"libduckdb.so reports {got}, want {sys.argv[2]}")
PY
    millpond_die "the downloaded libduckdb.so is not DuckDB v$MILLPOND_DUCKDB_VERSION"
mv -f "$tmp/package/libduckdb.so" "$dest/libduckdb.so"
echo "$integrity" >"$stamp"
echo "setup-duckdb: $dest/libduckdb.so" >&2
