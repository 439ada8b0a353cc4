#!/bin/sh
# Builds a Debian package of podvisor with dpkg-deb (no network, no extra tools).
# Usage: packaging/build-deb.sh [OUT_DIR]   (run from the repository root)
set -eu
out=${1:-target/debian}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
cargo build --release --locked
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
install -D -m 0755 target/release/podvisor "$pkg/usr/bin/podvisor"
install -D -m 0644 systemd/podvisor.service "$pkg/lib/systemd/system/podvisor.service"
install -D -m 0644 README.md "$pkg/usr/share/doc/podvisor/README.md"
install -D -m 0644 docs/design.md "$pkg/usr/share/doc/podvisor/design.md"
install -d -m 0755 "$pkg/etc/kubernetes/manifests" "$pkg/var/lib/podvisor/images/preload"
install -d -m 0755 "$pkg/DEBIAN"
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: podvisor
Version: $version
Architecture: $arch
Maintainer: podvisor developers <podvisor@localhost>
Depends: libc6, libseccomp2
Section: admin
Priority: optional
Description: single-node static-pod supervisor
 Runs Kubernetes v1 Pod manifests from /etc/kubernetes/manifests with kubelet
 semantics, without a cluster, containerd or CRI.
CONTROL
cat > "$pkg/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  systemctl enable podvisor.service >/dev/null 2>&1 || true
  # restart, not stop+start: running containers survive (KillMode=process) and are re-adopted
  systemctl restart podvisor.service >/dev/null 2>&1 || true
fi
POSTINST
chmod 0755 "$pkg/DEBIAN/postinst"
mkdir -p "$out"
dpkg-deb --root-owner-group --build "$pkg" "$out/podvisor_${version}_${arch}.deb"
