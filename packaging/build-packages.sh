#!/bin/bash
# Builds podvisor's packages with cargo-deb and cargo-generate-rpm: .deb for amd64, arm64 and
# armhf, .rpm for x86_64 and aarch64 (the rpm for a Debian architecture is skipped for armhf:
# 32-bit ARM RPM distributions are out of scope). Then checks them: lintian and rpmlint must
# pass (overrides are in packaging/debian/lintian-overrides, shipped in the .deb, and
# packaging/rpm/rpmlintrc with packaging/rpm/rpmlint.toml, each with its reason), and the
# declared glibc versions must cover what the binaries use.
#
# Usage: packaging/build-packages.sh [-a "amd64 arm64 armhf"] [-r REVISION] [-o OUT_DIR] [--no-lint]
#   -a   Debian architectures to build (default: all three)
#   -r   package revision (deb: 0.1.0-REVISION, rpm: release REVISION; default 1); the
#        install test builds a second revision to upgrade to
#   -o   where the packages go (default target/packages)
# Needs: cargo-deb and cargo-generate-rpm (`cargo install --locked cargo-deb
# cargo-generate-rpm`), lintian, rpmlint and rpm, binutils; for arm64/armhf what
# scripts/cross needs.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

archs="amd64 arm64 armhf"
revision=1
out=target/packages
lint=1
while [ $# -gt 0 ]; do
  case "$1" in
    -a) archs=$2; shift 2 ;;
    -r) revision=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --no-lint) lint=""; shift ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
log() { echo "packages: $*"; }

# --- man pages and completions, from a host build with the `docs` feature -------------------
log "generating man pages and completions (podvisor generate-docs)"
cargo build --locked --quiet --features docs --bin podvisor
rm -rf target/docs
target/debug/podvisor generate-docs target/docs >/dev/null
mkdir -p target/docs/man-gz
for page in target/docs/man/*.1; do
  gzip -9n -c "$page" > "target/docs/man-gz/$(basename "$page").gz"
done

for arch in $archs; do
  case "$arch" in
    amd64) rust_target=x86_64-unknown-linux-gnu rpm_arch=x86_64 ;;
    arm64) rust_target=aarch64-unknown-linux-gnu rpm_arch=aarch64 ;;
    armhf) rust_target=armv7-unknown-linux-gnueabihf rpm_arch="" ;;
    *) echo "packages: unknown architecture $arch" >&2; exit 2 ;;
  esac
  log "$arch: release build ($rust_target)"
  if [ "$arch" = amd64 ]; then
    # The host build (target/release, shared with `cargo build --release`).
    cargo build --release --locked --quiet
    bin=target/release/podvisor
    target_args=()
  else
    scripts/cross "$rust_target" build --release --locked --quiet
    bin=target/$rust_target/release/podvisor
    target_args=(--target "$rust_target")
  fi
  size=$(stat -c %s "$bin")
  # The size budget (docs/benchmarks.md): 10 MiB stripped on the 64-bit targets. The headroom is
  # printed on every run so each merge sees what the next feature can spend.
  budget=10485760
  if [ "$arch" = armhf ]; then
    log "$arch: $size bytes stripped (no budget on 32-bit)"
  elif [ "$size" -gt "$budget" ]; then
    echo "packages: $bin is $size bytes, $((size - budget)) bytes over the 10 MiB budget ($budget)" >&2
    exit 1
  else
    log "$arch: $size bytes stripped, headroom $((budget - size)) bytes under the 10 MiB budget ($budget)"
  fi
  packaging/check-depends.sh "$bin"

  deb=$(cargo deb --no-build --no-strip "${target_args[@]}" --deb-revision "$revision" \
    --output "$out" 2>/dev/null | tail -n1)
  [ -f "$deb" ] || { echo "packages: cargo deb produced no package" >&2; exit 1; }
  log "$arch: $deb"
  if [ -n "$lint" ]; then
    # Errors and warnings fail the build; the package's own overrides file
    # (packaging/debian/lintian-overrides) says why each overridden tag is fine. Info tags
    # are printed, not fatal.
    lintian --fail-on error,warning --tag-display-limit 0 "$deb"
  fi

  if [ -n "$rpm_arch" ]; then
    rpm_out=$out/podvisor-$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)-$revision.$rpm_arch.rpm
    cargo generate-rpm "${target_args[@]}" --arch "$rpm_arch" \
      --set-metadata "release = \"$revision\"" -o "$rpm_out" >/dev/null
    log "$arch: $rpm_out"
    if [ -n "$lint" ]; then
      rpmlint -c packaging/rpm/rpmlint.toml -r packaging/rpm/rpmlintrc "$rpm_out"
    fi
  fi
done
log "done: $(ls "$out" | tr '\n' ' ')"
