#!/usr/bin/env bash
# Makes the two Debian 12 base images the Dockerfile builds FROM without an
# image registry: debootstrap (minbase, bookworm) from the Debian mirror apt
# itself uses, imported into podman as docker.io/library/debian:<version> and
# tagged again as debian:<version>-slim. <version> is the Dockerfile's
# DEBIAN_VERSION; the point release actually installed is in the image label
# org.debian.version.
#
# Cached twice: when both tags are in podman's image store, nothing is done;
# the bootstrapped root file system is also kept as a tarball in
# ONELAYER_CACHE_DIR (default /var/cache/onelayer), so a removed image comes
# back in seconds. --force bootstraps again.
#
# usage: deploy/base-image.sh [--force]
# Needs root (debootstrap), podman and debootstrap (deploy/install-deps.sh test).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${ONELAYER_CACHE_DIR:-/var/cache/onelayer}"
force=0
case "${1:-}" in
  "") ;;
  --force) force=1 ;;
  *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

version="$(sed -n 's/^ARG DEBIAN_VERSION=\([0-9.]*\)$/\1/p' "$root/Dockerfile")"
[ -n "$version" ] || { echo "base-image: no 'ARG DEBIAN_VERSION=' in $root/Dockerfile" >&2; exit 1; }
image="docker.io/library/debian:$version"
slim="docker.io/library/debian:$version-slim"
tarball="$cache/debian-bookworm-minbase.tar"

have_images() { podman image exists "$image" && podman image exists "$slim"; }

if [ "$force" = 0 ] && have_images; then
  echo "base-image: $image and $slim are in podman's store (cached)"
  exit 0
fi

mkdir -p "$cache"
# One bootstrap at a time on this machine; the others wait and then find
# the images (or the tarball) made by the first.
exec 9>"$cache/base-image.lock"
flock -w 1800 9 || { echo "base-image: gave up waiting for $cache/base-image.lock" >&2; exit 1; }
if [ "$force" = 0 ] && have_images; then
  echo "base-image: $image and $slim were made while waiting (cached)"
  exit 0
fi

if [ "$force" = 1 ] || [ ! -s "$tarball" ]; then
  # The mirror apt uses for bookworm main, read from apt's own configuration
  # (sources.list or deb822 .sources files alike).
  mirror="$(apt-get indextargets --no-release-info --format '$(RELEASE) $(COMPONENT) $(REPO_URI)' |
            awk '$1 == "bookworm" && $2 == "main" { print $3; exit }')"
  [ -n "$mirror" ] || { echo "base-image: apt has no source for bookworm main" >&2; exit 1; }
  work="$(mktemp -d "$cache/bootstrap.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "base-image: debootstrap --variant=minbase bookworm from $mirror (a few minutes)"
  start=$SECONDS
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; echo "base-image: debootstrap failed" >&2; exit 1; }
  # As in Debian's own images: no package lists and no downloaded packages
  # (every apt-get install starts with apt-get update).
  rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/archives/"*.deb \
         "$work/rootfs/var/log/bootstrap.log"
  tar --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$tarball"
  echo "base-image: bootstrapped in $((SECONDS - start)) s; root file system kept in $tarball"
else
  echo "base-image: importing the cached root file system $tarball"
fi

point="$(tar -xOf "$tarball" ./etc/debian_version)"
podman import --quiet --change 'CMD ["bash"]' --change "LABEL org.debian.version=$point" \
  --change "LABEL org.onelayer.base=debootstrap-minbase-bookworm" "$tarball" "$image" >/dev/null
podman tag "$image" "$slim"
echo "base-image: $image and $slim ready (Debian $point, $(podman image inspect --format '{{.Size}}' "$image") bytes)"
