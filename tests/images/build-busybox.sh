#!/bin/sh
# Builds a busybox OCI archive offline from Debian's busybox-static, with umoci.
# Usage: tests/images/build-busybox.sh OUT.tar
# Then:  podvisor image import OUT.tar --ref docker.io/library/busybox:1.35
# BUSYBOX=path: another busybox (e.g. busybox-static:arm64's, for the arm64 VM), whose applets
# are listed by running BUSYBOX_LIST (default: BUSYBOX itself; a foreign binary cannot run);
# IMAGE_ARCH: the config's architecture (default: this host's).
# FILLER_MB=N adds N MiB of random data (/filler) to the layer: another image, slow to import.
set -eu
out=${1:?usage: $0 OUT.tar}
busybox=${BUSYBOX:-/bin/busybox}
busybox_list=${BUSYBOX_LIST:-$busybox}
for tool in umoci tar "$busybox"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing $tool (apt-get install umoci busybox-static)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umoci init --layout "$work/oci"
umoci new --image "$work/oci:latest"
umoci unpack --image "$work/oci:latest" "$work/bundle"
rootfs="$work/bundle/rootfs"
mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/root" "$rootfs/var/www"
chmod 1777 "$rootfs/tmp"
cp "$busybox" "$rootfs/bin/busybox"
for applet in $("$busybox_list" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$rootfs/etc/group"
if [ "${FILLER_MB:-0}" -gt 0 ]; then
  head -c "$((FILLER_MB * 1024 * 1024))" /dev/urandom > "$rootfs/filler"
fi
umoci repack --image "$work/oci:latest" "$work/bundle"
umoci config --image "$work/oci:latest" --config.cmd sh \
  --architecture "${IMAGE_ARCH:-$(dpkg --print-architecture)}" \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
umoci gc --layout "$work/oci"
tar -C "$work/oci" -cf "$out" .
echo "wrote $out"
