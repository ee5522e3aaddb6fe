# shellcheck shell=bash
# buildah without a Docker daemon, a system service or an image registry
# (sourced by scripts/build-images.sh after scripts/env.sh).
#
# Storage: $MILLPOND_IMAGES_HOME (default $MILLPOND_CACHE/images), vfs
# driver, chroot isolation, RUN steps on the host's network. The sandboxes
# this runs in refuse setrlimit, so containers.conf sets no ulimits.
#
# The runtime base the Dockerfile names, debian:bookworm-slim, is made here
# from Debian's packages (mmdebstrap minbase, with the official slim image's
# dpkg excludes: no docs, man pages or locales), since no image registry may
# be reachable, and kept between runs; it is rebuilt when missing or when
# its recipe changed. The Dockerfile's build stage (rust:1.95-bookworm) is
# not built here: scripts/build-images.sh hands it prebuilt binaries.

MILLPOND_IMAGES_HOME=${MILLPOND_IMAGES_HOME:-$MILLPOND_CACHE/images}
IMAGE_SLIM=docker.io/library/debian:bookworm-slim
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
    bh config --label "org.millpond.recipe=$recipe" --cmd bash "$ctr"
    bh rmi "$name" >/dev/null 2>&1 || true
    bh commit -q --rm "$ctr" "$name" >/dev/null
    echo "images: base $name made in $((SECONDS - t)) s" >&2
}

ensure_base_images() {
    local slim_recipe clean_hook
    printf '%s\n' "$APT_CLEAN" >"$MILLPOND_IMAGES_HOME/tmp/docker-clean"
    clean_hook="--customize-hook=cp '$MILLPOND_IMAGES_HOME/tmp/docker-clean' \"\$1/etc/apt/apt.conf.d/docker-clean\" && rm -f \"\$1\"/var/cache/apt/*.bin"
    slim_recipe=$(printf '%s\n' "${SLIM_DPKG_OPTS[@]}" "$APT_CLEAN" | sha256sum | cut -c1-16)
    base_image "$IMAGE_SLIM" "$slim_recipe" "${SLIM_DPKG_OPTS[@]/#/--dpkgopt=}" "$clean_hook"
}
