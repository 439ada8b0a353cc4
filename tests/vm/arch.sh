# Everything tests/vm/run.sh does differently per architecture, in one place (sourced by it).
# PODVISOR_VM_ARCH selects the guest: amd64 (default; qemu-system-x86_64) or arm64
# (qemu-system-aarch64 -M virt, Debian's arm64 kernel, the aarch64 podvisor from scripts/cross
# and busybox-static:arm64 for the initramfs and the test image).
#
# Defines: vm_arch, vm_cache_default, qemu_system (the qemu command and machine flags),
# vm_console, vm_tools (host commands needed), and the functions vm_kernel_download DIR
# (the kernel metapackage and the image package it depends on, as .debs in DIR),
# vm_busybox (prints a static busybox for the guest), vm_build_podvisor (prints the binary),
# vm_copy_libs STAGE BINARY... (their shared libraries and loader into the initramfs),
# vm_copy_cross_libs DEST TRIPLE ARCH LOADER BINARY... (the same for foreign binaries),
# vm_add_module DIR NAME (a kernel module and its dependencies, for insmod in DIR/order),
# vm_stage_armhf STAGE (the armv7 podvisor and its libraries, for the arm64 guest's armhf
# boot) and vm_default_scenarios (the scenarios run when PODVISOR_VM_ONLY is not set; empty:
# all).

vm_arch=${PODVISOR_VM_ARCH:-amd64}
vm_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
case "$vm_arch" in
  amd64)
    vm_cache_default=$vm_repo/target/vm-cache
    qemu_system=(qemu-system-x86_64)
    vm_console=ttyS0
    vm_tools=(qemu-system-x86_64 apparmor_parser)
    vm_default_scenarios=""
    ;;
  arm64)
    vm_cache_default=$vm_repo/target/vm-cache-arm64
    # cortex-a72 (ARMv8.0): `-cpu max` adds pointer authentication, which TCG emulates slowly.
    qemu_system=(qemu-system-aarch64 -M virt -cpu cortex-a72)
    vm_console=ttyAMA0
    vm_tools=(qemu-system-aarch64 aarch64-linux-gnu-gcc readelf)
    # Bounded for CI (software emulation of another ISA is 2-4x slower than the amd64 VM):
    # every kind of scenario once, no AppArmor (no arm64 apparmor_parser in the initramfs)
    # and no 50 cycles; the armhf boot (the armv7 podvisor as the daemon, "armhf" stands for
    # its scenarios); the reboot series ("reboot", 5 boots of ~30 s here, as many as in the
    # amd64 guest). PODVISOR_VM_ONLY=all runs everything but AppArmor and the series (see
    # docs/contributing.md).
    vm_default_scenarios=qos-guaranteed,qos-burstable,qos-besteffort,oom-killed,pids-limit,cpu-throttled,refused-outofmemory,device-filter,monitors-outside-pods,multiarch-image,probe-ready,crash-restart,boot-to-pods,pod-cgroup-removed,armhf,reboot
    ;;
  *)
    echo "vm-test: unknown PODVISOR_VM_ARCH $vm_arch (amd64 or arm64)" >&2
    exit 2
    ;;
esac

vm_kernel_download() { # DIR: linux-image-<arch> and the image package it depends on
  local dir=$1 meta real
  if [ "$vm_arch" = amd64 ]; then
    (cd "$dir" && apt-get download -qq linux-image-amd64) || return 1
  else
    "$vm_repo/scripts/debian-download" "$vm_arch" "$dir" "linux-image-$vm_arch" || return 1
  fi
  meta=$(ls "$dir"/linux-image-"$vm_arch"_*.deb)
  # linux-image-<arch> is a metapackage: its first Depends is the real image package.
  real=$(dpkg-deb -f "$meta" Depends | sed 's/^[[:space:]]*//; s/[[:space:],(|].*//')
  case "$real" in linux-image-*) ;; *) echo "unexpected Depends of $meta: $real" >&2; return 1 ;; esac
  if [ "$vm_arch" = amd64 ]; then
    (cd "$dir" && apt-get download -qq "$real")
  else
    "$vm_repo/scripts/debian-download" "$vm_arch" "$dir" "$real"
  fi
}

vm_busybox() { # [DEBIAN-ARCH]: of the guest's architecture by default (armhf: the armhf boot's image)
  local arch=${1:-$vm_arch} bb dl
  if [ "$arch" = amd64 ]; then
    command -v busybox
    return
  fi
  bb=$cache/busybox-$arch
  if [ ! -x "$bb" ]; then
    dl=$(mktemp -d "$cache/busybox.XXXXXX")
    "$vm_repo/scripts/debian-download" "$arch" "$dl" busybox-static >/dev/null &&
      dpkg-deb -x "$dl"/busybox-static_*.deb "$dl/x" && cp "$dl/x/bin/busybox" "$bb"
    rm -rf "$dl"
  fi
  echo "$bb"
}

vm_build_podvisor() {
  if [ "$vm_arch" = amd64 ]; then
    (cd "$vm_repo" && cargo build --locked --quiet --bin podvisor) >&2
    echo "$vm_repo/target/debug/podvisor"
  else
    # Release: what CI's packages already built (a no-op there), and a release binary is what
    # the arm64 .deb ships; under emulation it also starts pods faster than a debug build.
    "$vm_repo/scripts/cross" aarch64 build --release --locked --quiet --bin podvisor >&2
    echo "$vm_repo/target/aarch64-unknown-linux-gnu/release/podvisor"
  fi
}

vm_copy_libs() { # STAGE BINARY...: shared libraries and the dynamic loader
  local stage=$1 lib
  shift
  if [ "$vm_arch" = amd64 ]; then
    { ldd "$@" 2>/dev/null || true; } | awk '/:$/ {next} /=> \//{print $3} /^[[:space:]]*\//{print $1}' | sort -u |
      while read -r lib; do
        mkdir -p "$stage$(dirname "$lib")"
        cp -L "$lib" "$stage$lib"
      done
    return
  fi
  # /lib: in the loader's default search path and where PT_INTERP points.
  vm_copy_cross_libs "$stage/lib" aarch64-linux-gnu arm64 ld-linux-aarch64.so.1 "$@"
}

# vm_copy_cross_libs DEST GNU-TRIPLE DEBIAN-ARCH LOADER BINARY...: the NEEDED libraries of
# foreign binaries (which cannot be ldd'ed) and their dynamic loader into DEST, looked up in the
# cross libc (libc6-<arch>-cross) and the sysroot of scripts/cross (libseccomp), one level deep
# (libc's own dependencies are the loader only).
vm_copy_cross_libs() {
  local dest=$1 triple=$2 arch=$3 loader=$4 lib found d
  shift 4
  local dirs=("/usr/$triple/lib" "$vm_repo/target/cross/$arch/sysroot/usr/lib/$triple")
  mkdir -p "$dest"
  for lib in $(readelf -d -W "$@" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u) "$loader"; do
    found=""
    for d in "${dirs[@]}"; do
      if [ -e "$d/$lib" ]; then found=$d/$lib; break; fi
    done
    [ -n "$found" ] || { echo "vm-test: $lib (needed by $*) not found in ${dirs[*]}" >&2; return 1; }
    cp -L "$found" "$dest/$lib"
  done
}

# vm_stage_armhf STAGE: the armv7 podvisor (scripts/cross) at STAGE/vm/armhf/podvisor, its
# libraries where Debian's armhf loader looks first (STAGE/lib/arm-linux-gnueabihf) and the
# loader where the binary's PT_INTERP points (STAGE/lib/ld-linux-armhf.so.3), as on an armhf
# system: the armhf boot of the arm64 guest runs it as /usr/bin/podvisor, executed directly by
# the arm64 kernel (AArch32 compat), so that /proc/self/exe, which the daemon re-executes for
# its shims, is podvisor and not the loader.
vm_stage_armhf() {
  local stage=$1
  "$vm_repo/scripts/cross" armv7 build --release --locked --quiet --bin podvisor >&2 || return 1
  mkdir -p "$stage/vm/armhf"
  cp "$vm_repo/target/armv7-unknown-linux-gnueabihf/release/podvisor" "$stage/vm/armhf/podvisor"
  vm_copy_cross_libs "$stage/lib/arm-linux-gnueabihf" arm-linux-gnueabihf armhf ld-linux-armhf.so.3 \
    "$stage/vm/armhf/podvisor" || return 1
  ln -s arm-linux-gnueabihf/ld-linux-armhf.so.3 "$stage/lib/ld-linux-armhf.so.3"
}

# vm_add_module DIR NAME: copies module NAME of $kernel_dir (uncompressed) into DIR and appends
# it to DIR/order after its dependencies. The package has no modules.dep (depmod runs at
# install time), so dependencies come from each module's .modinfo "depends=" entry.
vm_add_module() {
  local dir=$1 name=$2 file base dep
  file=$(find "$kernel_dir/modules/kernel" \( -name "$name.ko*" -o -name "${name//_/-}.ko*" \) | head -n1)
  [ -n "$file" ] || { echo "vm-test: kernel module $name not found under $kernel_dir/modules" >&2; exit 2; }
  base=$name.ko
  touch "$dir/order"
  grep -qx "$base" "$dir/order" && return 0
  case "$file" in
    *.ko) cp "$file" "$dir/$base" ;;
    *.ko.xz) xz -dc "$file" > "$dir/$base" ;;
    *.ko.zst) zstd -qdc "$file" > "$dir/$base" ;;
    *) echo "vm-test: unsupported module file $file" >&2; exit 2 ;;
  esac
  for dep in $(tr '\0' '\n' < "$dir/$base" | sed -n 's/^depends=//p' | tr ',' ' '); do
    vm_add_module "$dir" "$dep"
  done
  echo "$base" >> "$dir/order"
}
