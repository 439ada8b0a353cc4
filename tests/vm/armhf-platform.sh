#!/bin/bash
# The armhf podvisor picks arm/v7 from a multi-platform index: the armv7 binary (from
# scripts/cross) runs under qemu-user (qemu-arm-static, with the cross libc and the sysroot's
# libseccomp) and imports tests/images/build-multiarch.sh's archive into a scratch root; the
# image it stored must be the index's linux/arm/v7 manifest.
# Usage (as root): tests/vm/armhf-platform.sh   Needs: qemu-user-static, what scripts/cross needs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v qemu-arm-static >/dev/null || { echo "missing qemu-arm-static (apt-get install qemu-user-static)" >&2; exit 2; }
"$repo/scripts/cross" armv7 build --release --locked --quiet --bin podvisor
bin=$repo/target/armv7-unknown-linux-gnueabihf/release/podvisor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$repo/tests/images/build-multiarch.sh" "$work/multiarch.tar" >/dev/null
want=$(tar -xOf "$work/multiarch.tar" ./index.json | python3 -c '
import json, sys
for m in json.load(sys.stdin)["manifests"]:
    p = m["platform"]
    if p["architecture"] == "arm" and p.get("variant") == "v7":
        print(m["digest"])')
run() {
  QEMU_LD_PREFIX=/usr/arm-linux-gnueabihf \
    LD_LIBRARY_PATH=$repo/target/cross/armhf/sysroot/usr/lib/arm-linux-gnueabihf \
    qemu-arm-static "$bin" --root-dir "$work/root" "$@"
}
run image import "$work/multiarch.tar"
got=$(run image ls --no-trunc | awk '$1 == "docker.io/library/multiarch:1.0" {print $2}')
echo "armhf podvisor stored $got; the index's linux/arm/v7 manifest is $want"
[ -n "$want" ] && [ "$got" = "$want" ]
