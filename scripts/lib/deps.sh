# Installs what podvisor needs on Debian 12 or Raspberry Pi OS (as root). Sourced by
# scripts/quickstart, scripts/test and .ci/run, so that PATH picks up a Rust installed here:
#
#   . scripts/lib/deps.sh
#   deps_install run     building and running podvisor (scripts/quickstart)
#   deps_install test    that and everything the test suite needs (scripts/test)
#   deps_install ci      that and the packaging tools (.ci/run, packaging/build-packages.sh)
#
# Debian packages already installed are left alone (no `apt-get update` when nothing is
# missing). Rust: Debian 12's rustc (1.63) is older than podvisor's rust-version, so the
# stable toolchain comes from rustup (https://rustup.rs, its installer into ~/.cargo) unless a
# cargo new enough is on PATH or in ~/.cargo/bin already.

# Building and running: a C compiler, make and libelf/zlib for libbpf (libcontainer builds it
# from source for the cgroup v2 device filter; the binary links neither libelf nor zlib),
# libseccomp-dev and pkg-config for seccomp, apparmor (apparmor_parser loads the default
# AppArmor profile), busybox-static and umoci for the offline busybox image
# (tests/images/build-busybox.sh), ca-certificates for crates.io.
# containernetworking-plugins and iptables: the pod network (Debian's CNI plugins: bridge,
# host-local, portmap, firewall, bandwidth, loopback; iptables-nft for their rules).
DEPS_RUN=(gcc libc6-dev make pkg-config libseccomp-dev libelf-dev zlib1g-dev apparmor
  busybox-static umoci ca-certificates containernetworking-plugins iptables)
# The tests, in addition: skopeo (images converted offline); docker-registry (the CNCF
# distribution registry) and apache2-utils (htpasswd) for the registry the pull tests run on
# loopback; qemu-system-x86, cpio and binutils (strip) for the cgroup v2 VM tests
# (tests/vm/run.sh); python3 (a seccomp test makes raw clone(2) calls with ctypes); e2fsprogs
# (mkfs.ext4: the disk of the VM's reboot series); curl, openssl and prometheus (promtool)
# as the real clients of the node API's tests (src/nodeapi, tests/nodeapi.rs). The arm64 VM test (issue 15):
# gcc-aarch64-linux-gnu, gcc-arm-linux-gnueabihf and their libc for scripts/cross (the
# target's libseccomp/libelf/zlib come from scripts/debian-download), qemu-system-arm (the
# arm64 guest, which also runs the armhf binary), and the Rust targets (DEPS_RUST_TARGETS).
# nftables (nft): the pod network tests check the rules of a host that also runs native
# nftables tables, and the VM's pod-network scenario copies nft into its initramfs.
# The real-workload test (tests/real_workloads.rs) installs nothing more: it downloads the
# .debs of its images (etcd-server, etcd-client, haproxy, nginx, libnginx-mod-stream,
# mosquitto, prometheus-node-exporter, dash and the libraries they need that the host lacks)
# with `apt-get download` into target/tmp/deb-images (tests/images/build-deb-image.sh), and
# uses umoci, skopeo, docker-registry, openssl (kubeadm's PKI, the apiserver stand-in) and
# curl (etcd's, the load balancers' and node-exporter's clients) from these lists.
# kubernetes-client (kubectl 1.20) reads what the API server tests wrote into the test API
# server (tests/apiserver.rs); installed only when no kubectl is on PATH, since another
# vendor's kubectl package owns /usr/bin/kubectl where one is installed (DEPS_TEST_KUBECTL).
DEPS_TEST_KUBECTL=(kubernetes-client)
DEPS_TEST=(skopeo docker-registry apache2-utils qemu-system-x86 cpio binutils python3
  e2fsprogs curl openssl prometheus nftables gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf
  libc6-dev-armhf-cross qemu-system-arm)
DEPS_RUST_TARGETS=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
# CI, in addition: lintian, rpmlint and rpm (rpmlint reads packages with it), debootstrap (the
# systemd VM of the install test, tests/vm/install.sh); from crates.io, pinned and built once
# per machine, cargo-deb and cargo-generate-rpm (DEPS_CARGO_CI).
DEPS_CI=(lintian rpmlint rpm debootstrap)
DEPS_CARGO_CI=(cargo-deb@3.8.0 cargo-generate-rpm@0.21.1)

deps_die() {
  echo "$0: $*" >&2
  exit 1
}

# The Debian packages of $@ that are not installed.
deps_missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
      echo "$p"
  done
}

deps_apt() {
  local missing
  mapfile -t missing < <(deps_missing_packages "$@")
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "$0: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # A mirror in the middle of a sync can fail one index for a while (measured:
  # bookworm-security armhf); retry once, then go on with the indexes that did arrive: the
  # install below fails clearly if a package is really missing.
  apt-get -o DPkg::Lock::Timeout=600 update -qq ||
    { sleep 30; apt-get -o DPkg::Lock::Timeout=600 update -qq; } ||
    echo "$0: apt-get update reported errors" >&2
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
}

# The minimum Rust version, from Cargo.toml's rust-version.
deps_rust_min() {
  sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../../Cargo.toml"
}

# Whether `rustc` on PATH is at least version $1 (major.minor).
deps_rustc_at_least() {
  local have
  have=$(rustc --version 2>/dev/null | sed -n 's/^rustc \([0-9]*\.[0-9]*\).*/\1/p')
  [ -n "$have" ] || return 1
  [ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n1)" = "$1" ]
}

deps_rust() {
  local min
  min=$(deps_rust_min)
  [ -n "$min" ] || deps_die "cannot read rust-version from Cargo.toml"
  if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
  fi
  if command -v cargo >/dev/null 2>&1 && deps_rustc_at_least "$min"; then
    return 0
  fi
  if command -v rustup >/dev/null 2>&1; then
    echo "$0: rustc $(rustc --version 2>/dev/null | cut -d' ' -f2) is older than $min: rustup update stable" >&2
    rustup toolchain install stable --profile minimal
    rustup default stable
  else
    echo "$0: installing Rust (stable) with rustup into ${CARGO_HOME:-$HOME/.cargo}" >&2
    deps_apt curl ca-certificates
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
      sh -s -- -y --profile minimal --default-toolchain stable --no-modify-path
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
  fi
  deps_rustc_at_least "$min" || deps_die "rustc $min or newer is needed, have: $(rustc --version 2>&1)"
}

# The Rust standard libraries of DEPS_RUST_TARGETS that rustup has not installed yet.
deps_rust_targets() {
  local t installed
  installed=$(rustup target list --installed 2>/dev/null || true)
  for t in "${DEPS_RUST_TARGETS[@]}"; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
  done
}

# The cargo tools of DEPS_CARGO_CI (name@version) not on PATH yet.
deps_cargo_tools() {
  local tool
  for tool in "${DEPS_CARGO_CI[@]}"; do
    command -v "${tool%@*}" >/dev/null 2>&1 || cargo install --locked --quiet "$tool"
  done
}

# deps_install run|test|ci
deps_install() {
  [ "$(id -u)" = 0 ] || deps_die "run as root (installs packages; podvisor runs containers as root)"
  command -v apt-get >/dev/null 2>&1 || deps_die "apt-get not found: Debian 12 or Raspberry Pi OS expected"
  local kubectl=()
  command -v kubectl >/dev/null 2>&1 || kubectl=("${DEPS_TEST_KUBECTL[@]}")
  case ${1:-} in
    run) deps_apt "${DEPS_RUN[@]}" ;;
    test) deps_apt "${DEPS_RUN[@]}" "${DEPS_TEST[@]}" "${kubectl[@]}" ;;
    ci) deps_apt "${DEPS_RUN[@]}" "${DEPS_TEST[@]}" "${kubectl[@]}" "${DEPS_CI[@]}" ;;
    *) deps_die "deps_install run|test|ci" ;;
  esac
  deps_rust
  case $1 in
    test) deps_rust_targets ;;
    ci) deps_rust_targets && deps_cargo_tools ;;
  esac
}
