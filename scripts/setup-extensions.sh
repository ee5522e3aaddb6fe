#!/usr/bin/env bash
# Fill $DUCKDB_EXTENSION_DIR/v<ver>/<platform>/ with the DuckDB extensions
# Millpond loads at runtime (writer/duckdb-extensions.txt), taken from
# the official PyPI wheels duckdb-extension-<name>==<ver>, and check that
# DuckDB (the venv's python duckdb, same version) LOADs each of them with
# autoinstall/autoload off and unsigned extensions disallowed.
# Idempotent: extensions already present are not downloaded again.
# Needs scripts/setup-python.sh to have run (venv with duckdb).
set -euo pipefail
# shellcheck source=scripts/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

ver=$MILLPOND_DUCKDB_VERSION
duck_platform=$(millpond_duckdb_platform)
case "$duck_platform" in
    linux_amd64) wheel_platform=manylinux2014_x86_64 ;;
    linux_arm64) wheel_platform=manylinux2014_aarch64 ;;
esac
dest=$DUCKDB_EXTENSION_DIR/v$ver/$duck_platform
python=$MILLPOND_VENV/bin/python
[ -x "$python" ] || millpond_die "$python missing; run scripts/setup-python.sh first"
command -v unzip >/dev/null || millpond_die "unzip not found; run scripts/setup-system.sh first"

# name and PyPI package of each extension, from the list the writer loads.
list=$MILLPOND_ROOT/writer/duckdb-extensions.txt
mapfile -t extensions < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")
[ ${#extensions[@]} -gt 0 ] || millpond_die "$list lists no extensions"

mkdir -p "$dest"
tmp=$(mktemp -d "$DUCKDB_EXTENSION_DIR/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

names=()
for entry in "${extensions[@]}"; do
    read -r name pkg <<<"$entry"
    pkg=duckdb-extension-$pkg
    names+=("$name")
    file=$dest/$name.duckdb_extension
    [ -s "$file" ] && continue
    mkdir -p "$tmp/$name"
    if ! "$python" -m pip download -q --no-deps --only-binary=:all: \
        --platform "$wheel_platform" --python-version 3.11 \
        -d "$tmp/$name" "$pkg==$ver" >"$tmp/$name.log" 2>&1; then
        cat "$tmp/$name.log" >&2
        millpond_die "pip download $pkg==$ver failed"
    fi
    echo "setup-extensions: installing $name from $pkg==$ver" >&2
    wheel=$(find "$tmp/$name" -maxdepth 1 -name '*.whl' | head -n1)
    [ -n "$wheel" ] || millpond_die "no wheel downloaded for $pkg==$ver"
    # Inside the wheel: <module>/extensions/v<ver>/<name>.duckdb_extension
    member=$(unzip -Z1 "$wheel" | grep -E "(^|/)extensions/v$ver/$name\.duckdb_extension$" | head -n1 || true)
    [ -n "$member" ] || {
        unzip -Z1 "$wheel" >&2
        millpond_die "$wheel has no extensions/v$ver/$name.duckdb_extension"
    }
    unzip -q -p "$wheel" "$member" >"$tmp/$name.duckdb_extension"
    [ -s "$tmp/$name.duckdb_extension" ] || millpond_die "extracted $member is empty"
    mv -f "$tmp/$name.duckdb_extension" "$file"
    rm -rf "${tmp:?}/$name" "${tmp:?}/$name.log"
done

"$python" - "$DUCKDB_EXTENSION_DIR" "$ver" "${names[@]}" <<'PY' || millpond_die "DuckDB could not LOAD the extensions in $DUCKDB_EXTENSION_DIR"
import sys
import duckdb

ext_dir, ver, names = sys.argv[1], sys.argv[2], sys.argv[3:]
if duckdb.__version__ != ver:
    sys.exit(f"venv duckdb is {duckdb.__version__}, extensions are for {ver}")
con = duckdb.connect(config={
    "extension_directory": ext_dir,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_unsigned_extensions": False,
})
for name in names:
    try:
        con.execute(f"LOAD {name}")
    except Exception as e:  # noqa: BLE001
        sys.exit(f"LOAD {name} failed: {e}")
loaded = {n for (n,) in con.execute(
    "SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()}
missing = set(names) - loaded
if missing:
    sys.exit(f"not loaded after LOAD: {sorted(missing)}")
PY
