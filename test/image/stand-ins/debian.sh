#!/usr/bin/env bash
# Builds a stand-in for an official Debian image, debian:<suite>-slim, for a machine that cannot pull
# images from a registry: the base the other stand-ins (the Dockerfiles beside this script) build on. The
# image test runs it only after `docker pull` has failed. Usage:
#
#   test/image/stand-ins/debian.sh <suite, e.g. trixie> <tag, e.g. debian:trixie-slim>
#
# As test/image/stand-in-base.sh makes the Node.js base: debootstrap's minimal variant from the mirror apt
# uses here, this machine's CA bundle (the registries are reached through a proxy whose CA only that
# bundle holds), and what the slim images leave out left out.
set -euo pipefail
suite="$1"
tag="$2"

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "stand-in: installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

# The Debian mirror apt uses here (deb822 .sources files or the one-line sources.list), not a guess.
mirror="$(
  {
    cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" {print $2}'
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break } }'
  } | grep -v -- '-security' | head -n 1 || true
)"
mirror="${mirror:-http://deb.debian.org/debian}"

work="$(mktemp -d "${TMPDIR:-/tmp}/petstore-stand-in.XXXXXX")"
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"

echo "stand-in: debootstrap --variant=minbase $suite from $mirror"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { cat "$work/debootstrap.log" >&2; exit 1; }

mkdir -p "$root/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# No service starts while a package installs in a build (there is no init to run it): what Docker's own
# debootstrap script for these images did.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"

rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*

tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "LABEL org.opencontainers.image.description=\"stand-in for the official $tag, built by test/image/stand-ins/debian.sh $(sha256sum "$0" | cut -c1-12)\"" \
  --change 'CMD ["bash"]' \
  - "$tag" >/dev/null
echo "stand-in: $tag built (Debian $(cat "$root/etc/debian_version"))"
