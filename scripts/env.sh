# shellcheck shell=bash
# Shared defaults for the Millpond scripts. Source it: `. scripts/env.sh`.
# Every value can be overridden from the environment.

MILLPOND_ROOT=${MILLPOND_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export MILLPOND_ROOT

export MILLPOND_CACHE=${MILLPOND_CACHE:-$HOME/.cache/millpond}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$MILLPOND_CACHE/target}
export MILLPOND_VENV=${MILLPOND_VENV:-$MILLPOND_CACHE/venv}
export DUCKDB_EXTENSION_DIR=${DUCKDB_EXTENSION_DIR:-$MILLPOND_CACHE/duckdb-extensions}
export MILLPOND_STATE=${MILLPOND_STATE:-$MILLPOND_CACHE/state}

# DuckDB version of the duckdb crate (=1.10505.0 -> v1.5.5); the prebuilt
# library, the extension wheels and the Python duckdb package match it exactly.
export MILLPOND_DUCKDB_VERSION=${MILLPOND_DUCKDB_VERSION:-1.5.5}
# Where scripts/setup-duckdb.sh puts libduckdb.so; the build links against it
# and records it as the binaries' rpath (build-support/duckdb_link.rs).
export DUCKDB_LIB_DIR=${DUCKDB_LIB_DIR:-$MILLPOND_CACHE/duckdb-lib/v$MILLPOND_DUCKDB_VERSION}

# Test services.
export MILLPOND_TEST_PG_PORT=${MILLPOND_TEST_PG_PORT:-5432}
export MILLPOND_TEST_S3_PORT=${MILLPOND_TEST_S3_PORT:-5077}

export MILLPOND_PYTHON=${MILLPOND_PYTHON:-$MILLPOND_VENV/bin/python}

# rustup installs cargo into ~/.cargo/bin, which non-login shells may lack.
if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi

# DuckDB's name for this platform (extension folders: v<ver>/<platform>/).
millpond_duckdb_platform() {
    case "$(uname -s)/$(uname -m)" in
        Linux/x86_64) echo linux_amd64 ;;
        Linux/aarch64) echo linux_arm64 ;;
        *) millpond_die "no DuckDB extensions for $(uname -s)/$(uname -m)" ;;
    esac
}

# Print an error and exit.
millpond_die() {
    echo "error: $*" >&2
    exit 1
}
