# shellcheck shell=bash
# buildah without a Docker daemon, a system service or an image registry
# (sourced by scripts/build-images.sh after scripts/env.sh).
#
# Storage: $MILLPOND_IMAGES_HOME (default $MILLPOND_CACHE/images), vfs
# driver, chroot isolation, RUN steps on the host's network. The sandboxes
# this runs in refuse setrlimit, so containers.conf sets no ulimits.
#
# The two base images the Dockerfile names are made here from Debian's
# packages, since no image registry may be reachable, and kept between
# runs; each is rebuilt when missing or when its recipe (for the Rust image,
# the host's toolchain) changed:
#   debian:bookworm-slim  mmdebstrap minbase, with the official slim image's
#                         dpkg excludes (no docs, man pages or locales)
#   rust:1.95-bookworm    Debian bookworm with the build packages of the
#                         official image that a build needs, and the host's
#                         Rust toolchain at the official image's paths
#                         (RUSTUP_HOME=/usr/local/rustup,
#                         CARGO_HOME=/usr/local/cargo)

MILLPOND_IMAGES_HOME=${MILLPOND_IMAGES_HOME:-$MILLPOND_CACHE/images}
IMAGE_SLIM=docker.io/library/debian:bookworm-slim
IMAGE_RUST=docker.io/library/rust:1.95-bookworm
# What the official rust:<ver>-bookworm (buildpack-deps:bookworm) has and a
# build needs: the compilers, the C library's headers and the tools cargo's
# build scripts and the setup scripts call.
RUST_IMAGE_PACKAGES=(ca-certificates curl wget gnupg netbase git openssh-client procps
    gcc g++ make libc6-dev dpkg-dev file patch xz-utils bzip2 unzip
    libssl-dev zlib1g-dev libcurl4-openssl-dev)
# The official images' /etc/apt/apt.conf.d/docker-clean: apt keeps no
# downloaded packages and no package caches in a layer.
APT_CLEAN='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";'
# The official slim image's /etc/dpkg/dpkg.cfg.d/docker.
SLIM_DPKG_OPTS=(path-exclude=/usr/share/doc/* path-include=/usr/share/doc/*/copyright
    path-exclude=/usr/share/groff/* path-exclude=/usr/share/info/* path-exclude=/usr/share/linda/*
    path-exclude=/usr/share/lintian/* path-exclude=/usr/share/locale/*
    path-include=/usr/share/locale/locale.alias path-exclude=/usr/share/man/*)

# buildah on Millpond's own storage.
bh() {
    CONTAINERS_CONF=$MILLPOND_IMAGES_HOME/containers.conf TMPDIR=$MILLPOND_IMAGES_HOME/tmp \
        buildah --root "$MILLPOND_IMAGES_HOME/storage" --runroot "$MILLPOND_IMAGES_HOME/run" \
        --storage-driver vfs "$@"
}

buildah_setup() {
    command -v buildah >/dev/null || millpond_die "buildah not found (scripts/setup-system.sh installs it)"
    command -v mmdebstrap >/dev/null || millpond_die "mmdebstrap not found (scripts/setup-system.sh installs it)"
    mkdir -p "$MILLPOND_IMAGES_HOME/tmp"
    printf '[containers]\ndefault_ulimits = []\n' >"$MILLPOND_IMAGES_HOME/containers.conf"
}

# The recipe label of an image, empty when the image is missing.
image_recipe() {
    bh inspect --type image --format '{{index .OCIv1.Config.Labels "org.millpond.recipe"}}' "$1" 2>/dev/null || true
}

# base_image NAME RECIPE MMDEBSTRAP-ARGS...: make NAME from an mmdebstrap
# tarball unless an image of that name with that recipe exists.
base_image() {
    local name=$1 recipe=$2
    shift 2
    if [ "$(image_recipe "$name")" = "$recipe" ]; then
        echo "images: base $name is current" >&2
        return
    fi
    local t=$SECONDS tar="$MILLPOND_IMAGES_HOME/tmp/base.tar" ctr
    echo "images: making base $name with mmdebstrap" >&2
    rm -f "$tar"
    local log="$MILLPOND_IMAGES_HOME/tmp/mmdebstrap.log"
    mmdebstrap --variant=minbase "$@" bookworm "$tar" >"$log" 2>&1 ||
        { tail -n 40 "$log" >&2; millpond_die "mmdebstrap for $name failed"; }
    ctr=$(bh from scratch)
    bh add "$ctr" "$tar" / >/dev/null
    rm -f "$tar"
    bh config --label "org.millpond.recipe=$recipe" --cmd bash "${BASE_CONFIG[@]}" "$ctr"
    bh rmi "$name" >/dev/null 2>&1 || true
    bh commit -q --rm "$ctr" "$name" >/dev/null
    echo "images: base $name made in $((SECONDS - t)) s" >&2
}

ensure_base_images() {
    local slim_recipe rust_recipe sysroot release host_triple rustup_bin toolchain
    BASE_CONFIG=()
    local clean_hook
    printf '%s\n' "$APT_CLEAN" >"$MILLPOND_IMAGES_HOME/tmp/docker-clean"
    clean_hook="--customize-hook=cp '$MILLPOND_IMAGES_HOME/tmp/docker-clean' \"\$1/etc/apt/apt.conf.d/docker-clean\" && rm -f \"\$1\"/var/cache/apt/*.bin"
    slim_recipe=$(printf '%s\n' "${SLIM_DPKG_OPTS[@]}" "$APT_CLEAN" | sha256sum | cut -c1-16)
    base_image "$IMAGE_SLIM" "$slim_recipe" "${SLIM_DPKG_OPTS[@]/#/--dpkgopt=}" "$clean_hook"

    # The host's toolchain, under the name rustup gives it in the official
    # image (<version>-<host>), without its HTML documentation.
    sysroot=$(rustc --print sysroot)
    release=$(rustc -vV | sed -n 's/^release: //p')
    host_triple=$(rustc -vV | sed -n 's/^host: //p')
    rustup_bin=$(command -v rustup) || millpond_die "rustup not found (the Rust base image carries the host's rustup)"
    toolchain=$release-$host_triple
    # This machine's own certificate authorities (a TLS-intercepting proxy's,
    # say) go into the build base too, for pip and npm as well, so the build
    # stage reaches PyPI and npm as the host does. The runtime images get
    # Debian's ca-certificates only.
    local cas=() ca_hooks=()
    shopt -s nullglob
    cas=(/usr/local/share/ca-certificates/*.crt)
    shopt -u nullglob
    rust_recipe=$({
        rustc -vV
        cargo -V
        printf '%s\n' "${RUST_IMAGE_PACKAGES[@]}" "$APT_CLEAN"
        [ ${#cas[@]} -eq 0 ] || cat "${cas[@]}"
    } | sha256sum | cut -c1-16)
    BASE_CONFIG=(--env RUSTUP_HOME=/usr/local/rustup --env CARGO_HOME=/usr/local/cargo
        --env PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        --env "RUST_VERSION=$release")
    if [ ${#cas[@]} -gt 0 ]; then
        ca_hooks=(--customize-hook="cp ${cas[*]} \"\$1/usr/local/share/ca-certificates/\" && chroot \"\$1\" update-ca-certificates >/dev/null")
        BASE_CONFIG+=(--env PIP_CERT=/etc/ssl/certs/ca-certificates.crt --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
    fi
    local tc=/usr/local/rustup/toolchains/$toolchain
    base_image "$IMAGE_RUST" "$rust_recipe" "--include=$(
        IFS=,
        echo "${RUST_IMAGE_PACKAGES[*]}"
    )" \
        --customize-hook="mkdir -p \"\$1$tc\" \"\$1/usr/local/cargo/bin\"" \
        --customize-hook="tar -C '$sysroot' --exclude=./share/doc -cf - . | tar -C \"\$1$tc\" -xf -" \
        --customize-hook="printf 'version = \"12\"\\ndefault_toolchain = \"$toolchain\"\\nprofile = \"minimal\"\\n' >\"\$1/usr/local/rustup/settings.toml\"" \
        --customize-hook="install -m 0755 '$rustup_bin' \"\$1/usr/local/cargo/bin/rustup\"" \
        --customize-hook="for t in cargo rustc rustdoc; do ln -s rustup \"\$1/usr/local/cargo/bin/\$t\"; done" \
        --customize-hook="chmod -R a+w \"\$1/usr/local/rustup\" \"\$1/usr/local/cargo\"" \
        "$clean_hook" "${ca_hooks[@]}"
    BASE_CONFIG=()
}
