#!/bin/bash
# Builds one multi-platform busybox image offline: an OCI archive whose index.json holds three
# manifests of the same name, for linux/amd64, linux/arm64/v8 and linux/arm/v7, each with that
# architecture's busybox-static (Debian's packages, fetched by scripts/debian-download for the
# foreign ones) and a file /etc/podvisor-platform naming its platform. Importing it must pick
# the entry of the machine podvisor runs on (the arm64 VM: arm64/v8; an armhf podvisor under
# qemu-user: arm/v7; this host: amd64).
# Usage: tests/images/build-multiarch.sh OUT.tar   (as root; umoci, python3)
set -euo pipefail
out=${1:?usage: $0 OUT.tar}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=$repo/target/cross/busybox
mkdir -p "$cache"
work=$(mktemp -d)
chmod 755 "$work" # apt downloads into it as _apt
trap 'rm -rf "$work"' EXIT

busybox_for() { # DEBIAN-ARCH: a static busybox of that architecture
  if [ "$1" = amd64 ] && [ "$(dpkg --print-architecture)" = amd64 ]; then
    command -v busybox
    return
  fi
  local bb=$cache/busybox-$1
  if [ ! -x "$bb" ]; then
    "$repo/scripts/debian-download" "$1" "$work/dl-$1" busybox-static >/dev/null
    dpkg-deb -x "$work/dl-$1"/busybox-static_*.deb "$work/x-$1"
    cp "$work/x-$1/bin/busybox" "$bb"
  fi
  echo "$bb"
}

umoci init --layout "$work/oci"
for platform in amd64 arm64/v8 arm/v7; do
  arch=${platform%%/*}
  case "$arch" in arm) deb=armhf ;; *) deb=$arch ;; esac
  tag=${platform//\//-}
  bb=$(busybox_for "$deb")
  umoci new --image "$work/oci:$tag"
  umoci unpack --image "$work/oci:$tag" "$work/b-$tag"
  root=$work/b-$tag/rootfs
  mkdir -p "$root/bin" "$root/etc" "$root/tmp"
  cp "$bb" "$root/bin/busybox"
  # The applets the pods use; links need no running of a foreign busybox.
  for applet in sh cat echo sleep; do ln -s busybox "$root/bin/$applet"; done
  echo "linux/$platform" > "$root/etc/podvisor-platform"
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
  printf 'root:x:0:\n' > "$root/etc/group"
  umoci repack --image "$work/oci:$tag" "$work/b-$tag"
  umoci config --image "$work/oci:$tag" --architecture "$arch" --config.cmd sh \
    --config.env PATH=/bin
done
umoci gc --layout "$work/oci"
# One name for the three manifests, each with its platform: an index.json as `docker buildx`
# or `skopeo copy --all` to an oci-archive writes it.
python3 - "$work/oci/index.json" <<'PY'
import json, sys
path = sys.argv[1]
index = json.load(open(path))
for m in index["manifests"]:
    tag = m["annotations"]["org.opencontainers.image.ref.name"]
    parts = tag.split("-")
    m["platform"] = {"os": "linux", "architecture": parts[0]}
    if len(parts) > 1:
        m["platform"]["variant"] = parts[1]
    m["annotations"]["org.opencontainers.image.ref.name"] = "docker.io/library/multiarch:1.0"
json.dump(index, open(path, "w"))
PY
tar -C "$work/oci" -cf "$out" .
echo "wrote $out"
