#!/bin/bash
# cgroup v2 VM tests: boots Debian's kernel under qemu (software emulation, no KVM) with an
# initramfs holding podvisor, busybox and the busybox test image, runs the scenarios of
# tests/vm/scenarios.sh as real pods through the podvisor daemon on a pure cgroup v2 tree,
# and reads one result line per scenario back from the serial console. Then the reboot
# series (tests/vm/reboot.sh): a fresh ext4 disk image holds podvisor's root, log and
# manifest directories, and the VM is booted again and again on it: an orderly reboot, then
# power cuts (sysrq b with -no-reboot: qemu exits with what the guest had written to the
# disk) during churn, each verified by the next boot.
#
# Usage (as root, from anywhere): tests/vm/run.sh
# Needs: qemu-system-x86 cpio busybox-static umoci e2fsprogs (apt), cargo. The kernel package
# is fetched with `apt-get download` on first use and cached under $PODVISOR_VM_CACHE (default
# target/vm-cache). Exit status 0 only if every expected scenario printed PASS.
# PODVISOR_VM_ARCH=arm64 runs the same scenarios in an arm64 guest (tests/vm/arch.sh holds
# everything that differs per architecture; it also needs qemu-system-arm and what
# scripts/cross needs), and boots that guest once more with the armhf (armv7) podvisor as the
# daemon, run by the arm64 kernel's AArch32 compat layer, on armhf busybox images: the
# armhf-* scenarios.
#
# Environment knobs:
#   PODVISOR_VM_CACHE    cache directory (kernel, console logs, the series' disk); default
#                        target/vm-cache
#   PODVISOR_BIN         use this podvisor binary instead of building one with cargo
#   PODVISOR_VM_TIMEOUT  limit for each boot in seconds (default 400)
#   PODVISOR_VM_BOOT_TIMEOUT  limit until the guest reports it started (default 90)
#   PODVISOR_VM_MEM      guest memory in MiB (default 1024)
#   PODVISOR_VM_ONLY     comma-separated scenario names to run instead of all of them (the
#                        reboot series runs when one of its names, or "reboot" for all of
#                        them, is listed; memory-pressure always boots a VM of its own, and
#                        so do the arm64 guest's armhf-* scenarios, "armhf" for all of them)
#   PODVISOR_VM_SMP      guest cpus (default 2; each is one host thread of qemu's TCG)
#   PODVISOR_VM_CUTS     power cuts in the reboot series (default 3, one boot each; 0 leaves
#                        only the orderly reboot); the churn before a cut cycles through
#                        manifest edits, container kills and an image import
#   PODVISOR_VM_CHURN    the churn cycle before the cuts (default edits,kills,import)
#   PODVISOR_VM_DISK_MB  size of the series' ext4 disk (default 512)
#   PODVISOR_VM_APPEND   more kernel parameters for every boot (e.g. "loglevel=7
#                        softlockup_all_cpu_backtrace=1" to see the stacks behind a soft lockup)
set -euo pipefail

log() { echo "vm-test: $*"; }
die() { echo "vm-test: error: $*" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/arch.sh
. "$here/arch.sh"
cache=${PODVISOR_VM_CACHE:-$vm_cache_default}
overall_timeout=${PODVISOR_VM_TIMEOUT:-400}
boot_timeout=${PODVISOR_VM_BOOT_TIMEOUT:-90}
mem=${PODVISOR_VM_MEM:-1024}
smp=${PODVISOR_VM_SMP:-2}
cuts=${PODVISOR_VM_CUTS:-3}
churn=${PODVISOR_VM_CHURN:-edits,kills,import}
disk_mb=${PODVISOR_VM_DISK_MB:-512}
# Kernel modules podvisor needs that Debian builds as modules (dependencies follow); brd gives
# the block device /dev/ram0 of the device-filter scenarios; the disk of the reboot series
# needs virtio and ext4 (whose metadata checksums need crc32c).
modules=(overlay brd virtio_pci virtio_blk crc32c_generic ext4)
# The pod-network scenario (amd64 guest): veth and bridge, nftables with the xtables
# extensions iptables-nft uses for the rules of Debian's bridge, portmap and firewall plugins
# (nat, masquerade, DNAT, comments, addrtype, marks, multiport, conntrack).
net_modules=(veth bridge nf_tables nft_compat nft_chain_nat nf_nat nf_conntrack nft_ct
  nft_masq xt_MASQUERADE xt_nat xt_comment xt_addrtype xt_mark xt_multiport xt_conntrack
  xt_tcpudp)
# Every scenario the guest must report; a missing line is a failure.
scenarios=(
  qos-guaranteed qos-burstable qos-besteffort
  oom-killed oom-child pids-limit cpu-throttled
  refused-outofcpu refused-outofmemory
  device-filter privileged-device apparmor-default apparmor-localhost
  multiarch-image share-pid probe-ready crash-restart boot-to-pods
  monitors-outside-pods pod-cgroup-removed cycles-50
)
# Scenarios that get a boot of their own (so their minutes do not count against the
# scenarios boot's time limit): memory-pressure presses the whole VM's memory; pod-network
# runs a daemon of its own on the pod network (amd64 guest only).
own_boot=(memory-pressure pod-network)
# The armhf boot (arm64 guest): the armv7 podvisor is the daemon (and every podvisor command)
# under the arm64 kernel's AArch32 compat layer, as on a Raspberry Pi running 32-bit Raspberry
# Pi OS on a 64-bit kernel, with 32-bit ARM busybox images: a pod with limits, an OOM kill,
# the eBPF device filter (bpf(2) from a compat process), the probes (under RuntimeDefault
# seccomp, the 32-bit ARM audit arch), a crash and its restart, the multi-platform image's
# linux/arm/v7 entry, and the pods' removal. Each name is the scenario of scenarios.sh it
# runs, prefixed with armhf-.
armhf_scenarios=()
if [ "$vm_arch" != amd64 ]; then
  # No apparmor_parser of the guest's architecture in the initramfs, and no CNI plugins,
  # iptables or nft of it either.
  scenarios=("${scenarios[@]/apparmor-*/}")
  own_boot=(memory-pressure)
  read -r -a scenarios <<< "${scenarios[*]}"
  armhf_scenarios=(armhf-qos-guaranteed armhf-oom-killed armhf-device-filter armhf-probe-ready
    armhf-crash-restart armhf-multiarch-image armhf-pod-cgroup-removed)
  # "all": every scenario there is (the reboot series only when named); unset: the CI subset.
  [ "${PODVISOR_VM_ONLY:-}" = all ] && PODVISOR_VM_ONLY=$(IFS=,; echo "${scenarios[*]},${own_boot[*]},armhf")
  PODVISOR_VM_ONLY=${PODVISOR_VM_ONLY:-$vm_default_scenarios}
fi
series=(reboot-setup reboot-orderly)
for ((i = 1; i <= cuts; i++)); do series+=("power-cut-$i"); done
expected=("${scenarios[@]}" "${own_boot[@]}" "${armhf_scenarios[@]}" "${series[@]}")
run_scenarios=1
run_series=1
run_own=("${own_boot[@]}")
scenarios_only="" # the scenarios boot's podvisor_vm.only (own-boot scenarios left out)
armhf_only=$(IFS=,; echo "${armhf_scenarios[*]}") # the armhf boot's podvisor_vm.only
if [ -n "${PODVISOR_VM_ONLY:-}" ]; then
  IFS=, read -r -a only_names <<< "$PODVISOR_VM_ONLY"
  expected=() run_scenarios="" run_series="" run_own=() armhf_only=""
  for name in "${only_names[@]}"; do
    case "$name" in
      reboot) run_series=1 expected+=("${series[@]}") ;; # the whole series
      reboot-* | power-cut-*) run_series=1 expected+=("$name") ;;
      memory-pressure | pod-network) run_own+=("$name") expected+=("$name") ;;
      armhf | armhf-*)
        [ ${#armhf_scenarios[@]} -gt 0 ] || die "$name: the armhf boot is the arm64 guest's (PODVISOR_VM_ARCH=arm64)"
        if [ "$name" = armhf ]; then names=("${armhf_scenarios[@]}"); else names=("$name"); fi
        expected+=("${names[@]}")
        armhf_only="${armhf_only:+$armhf_only,}$(IFS=,; echo "${names[*]}")" ;;
      *) run_scenarios=1 expected+=("$name") scenarios_only="${scenarios_only:+$scenarios_only,}$name" ;;
    esac
  done
fi

t0=$(date +%s)

[ "$(id -u)" = 0 ] || die "must run as root (umoci builds the test image with root-owned files)"
for tool in "${vm_tools[@]}" cpio busybox umoci apt-get dpkg-deb strip; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "missing $tool (apt-get install qemu-system-x86 qemu-system-arm cpio busybox-static umoci binutils apparmor gcc-aarch64-linux-gnu)"
done
mkdir -p "$cache"
busybox_bin=$(vm_busybox)
# The Debian busybox package puts a dynamic busybox at /bin/busybox only with busybox (not
# busybox-static); the VM has no libc for it, so insist on the static one.
if [ "$vm_arch" = amd64 ] && ldd "$busybox_bin" >/dev/null 2>&1; then
  die "$busybox_bin is dynamically linked: install busybox-static"
fi

# --- 1. podvisor ---------------------------------------------------------------------------
if [ -n "${PODVISOR_BIN:-}" ]; then
  podvisor=$PODVISOR_BIN
else
  log "building podvisor for $vm_arch"
  podvisor=$(vm_build_podvisor)
fi
[ -x "$podvisor" ] || die "no podvisor binary at $podvisor"
t_build=$(date +%s)

# --- 2. kernel (cached) ---------------------------------------------------------------------
kernel_dir=$(find "$cache" -maxdepth 1 -type d -name "kernel-*-$vm_arch" 2>/dev/null | sort | tail -n1)
if [ -z "$kernel_dir" ] || [ ! -f "$kernel_dir/vmlinuz" ]; then
  log "fetching the Debian kernel with apt-get download (first run only)"
  dl=$(mktemp -d "$cache/download.XXXXXX")
  trap 'rm -rf "$dl"' EXIT
  chmod 755 "$dl"
  chown _apt "$dl" 2>/dev/null || true # lets apt download without the "unsandboxed" warning
  vm_kernel_download "$dl" || die "downloading linux-image-$vm_arch failed (run apt-get update?)"
  dpkg-deb -x "$(ls "$dl"/linux-image-[0-9]*.deb)" "$dl/x"
  version=$(ls "$dl/x/lib/modules")
  kernel_dir=$cache/kernel-$version
  rm -rf "$kernel_dir"
  mkdir -p "$kernel_dir"
  cp "$dl/x/boot/vmlinuz-$version" "$kernel_dir/vmlinuz"
  mv "$dl/x/lib/modules/$version" "$kernel_dir/modules"
  echo "$version" > "$kernel_dir/version"
  rm -rf "$dl"
  trap - EXIT
fi
kversion=$(cat "$kernel_dir/version")
t_kernel=$(date +%s)

# --- 3. initramfs ---------------------------------------------------------------------------
stage=$(mktemp -d "$cache/initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,vm/modules,vm/images,etc,proc,sys,dev,newroot}
# busybox and its applet links
cp "$busybox_bin" "$stage/bin/busybox"
for applet in $(busybox --list-full); do # the host's busybox-static: same version, and it runs here
  [ -e "$stage/$applet" ] || ln -s /bin/busybox "$stage/$applet"
done
# podvisor without symbols and debug info, apparmor_parser (the VM kernel has AppArmor) and the
# policy includes it uses, their shared libraries and the dynamic loader
strip --strip-all -o "$stage/usr/bin/podvisor" "$podvisor" 2>/dev/null ||
  cp "$podvisor" "$stage/usr/bin/podvisor" # another architecture's binary: stripped by its profile
if [ "$vm_arch" = amd64 ]; then
  cp "$(command -v apparmor_parser)" "$stage/usr/sbin/apparmor_parser"
  for d in abi tunables abstractions; do
    [ -d "/etc/apparmor.d/$d" ] && mkdir -p "$stage/etc/apparmor.d" && cp -a "/etc/apparmor.d/$d" "$stage/etc/apparmor.d/"
  done
  vm_copy_libs "$stage" "$podvisor" "$(command -v apparmor_parser)"
else
  vm_copy_libs "$stage" "$podvisor" || die "libraries for $podvisor"
fi
# kernel modules in load order (dependencies first); the package has no modules.dep (depmod
# runs at install time), so dependencies come from each module's .modinfo "depends=" entry
: > "$stage/vm/modules/order"
add_module() { vm_add_module "$stage/vm/modules" "$1"; }
for m in "${modules[@]}"; do add_module "$m"; done
# pod networking (amd64 guest): Debian's CNI plugins, iptables-nft (with its extensions) and
# nft, their libraries, and the kernel modules they need
if [ "$vm_arch" = amd64 ]; then
  cni_plugins=(bridge host-local portmap firewall bandwidth loopback)
  net_tools=(/usr/sbin/xtables-nft-multi /usr/sbin/nft)
  for p in "${cni_plugins[@]}"; do net_tools+=("/usr/lib/cni/$p"); done
  for f in "${net_tools[@]}"; do
    [ -x "$f" ] || die "missing $f (apt-get install containernetworking-plugins iptables nftables)"
  done
  mkdir -p "$stage/usr/lib/cni"
  for f in "${net_tools[@]}"; do
    dest=$stage$f
    [ "${f#/usr/lib/cni/}" = "$f" ] || dest=$stage/usr/lib/cni/$(basename "$f")
    rm -f "$dest" # never through a busybox applet link
    cp "$f" "$dest"
  done
  for l in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    rm -f "$stage/usr/sbin/$l" "$stage/sbin/$l"
    ln -s xtables-nft-multi "$stage/usr/sbin/$l"
  done
  xt=$(dirname "$(find /usr/lib -name libxt_comment.so -print -quit)")
  mkdir -p "$stage$xt"
  cp -a "$xt/." "$stage$xt/"
  cp /etc/protocols /etc/services "$stage/etc/" 2>/dev/null || true
  vm_copy_libs "$stage" "${net_tools[@]}" "$xt"/*.so
  for m in "${net_modules[@]}"; do add_module "$m"; done
fi
# the test image, built offline like the other tests' image; for the reboot series a second
# image with 8 MiB of random data, imported while the power is cut
BUSYBOX=$busybox_bin BUSYBOX_LIST=$(command -v busybox) IMAGE_ARCH=$vm_arch \
  "$repo/tests/images/build-busybox.sh" "$stage/vm/images/busybox.tar" >/dev/null
if [ -n "$run_series" ]; then
  BUSYBOX=$busybox_bin BUSYBOX_LIST=$(command -v busybox) IMAGE_ARCH=$vm_arch FILLER_MB=8 \
    "$repo/tests/images/build-busybox.sh" "$stage/vm/images/churn.tar" >/dev/null
fi
# one image for amd64, arm64/v8 and arm/v7 in one OCI index (the multiarch-image scenario)
"$repo/tests/images/build-multiarch.sh" "$stage/vm/images/multiarch.tar" >/dev/null
if [ -n "$armhf_only" ]; then
  # the armhf boot: the armv7 podvisor with its loader and libraries, and the test image with
  # busybox-static:armhf (applets listed by the host's busybox, of the same Debian version)
  vm_stage_armhf "$stage" || die "staging the armv7 podvisor failed"
  armhf_busybox=$(vm_busybox armhf)
  [ -x "$armhf_busybox" ] || die "no busybox-static:armhf at $armhf_busybox (scripts/debian-download failed?)"
  BUSYBOX=$armhf_busybox BUSYBOX_LIST=$(command -v busybox) IMAGE_ARCH=arm \
    "$repo/tests/images/build-busybox.sh" "$stage/vm/images/busybox-armhf.tar" >/dev/null
fi
# init, scenarios, manifests, configuration
cp "$here/init" "$stage/init"
cp "$here/scenarios.sh" "$here/reboot.sh" "$here/kubelet-config.yaml" "$here/apparmor-missing.yaml" "$stage/vm/"
cp -r "$here/manifests" "$stage/vm/manifests"
cp -r "$here/reboot" "$stage/vm/reboot"
chmod 755 "$stage/init" "$stage/vm/scenarios.sh" "$stage/vm/reboot.sh"
initrd=$cache/initrd.cpio
# Uncompressed: unpacking gzip under software emulation costs more than reading the bytes.
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) > "$initrd"
rm -rf "$stage"
trap - EXIT
t_initrd=$(date +%s)
log "kernel $kversion, initramfs $(( $(stat -c %s "$initrd") / 1024 / 1024 )) MiB; build $((t_build - t0)) s, kernel $((t_kernel - t_build)) s, initramfs $((t_initrd - t_kernel)) s"

# --- 4. boot and collect results ------------------------------------------------------------
console=$cache/console.log
: > "$console"
boot_failed=""
# boot_vm NAME APPEND [QEMU ARGS...]: one VM run with its console in $cache/console-NAME.log,
# result lines printed as they come; sets $boot_failed to why when it timed out.
boot_vm() {
  local name=$1 append=$2
  shift 2
  local clog=$cache/console-$name.log t_boot printed=0 lines n elapsed
  : > "$clog"
  t_boot=$(date +%s)
  log "booting $name (qemu software emulation, $smp cpus, ${mem} MiB; console log: $clog)"
  "${qemu_system[@]}" -nographic -no-reboot -nic none -m "$mem" -smp "$smp" \
    -kernel "$kernel_dir/vmlinuz" -initrd "$initrd" \
    -append "console=$vm_console quiet loglevel=3 panic=-1 cgroup_no_v1=all $append ${PODVISOR_VM_APPEND:-}" "$@" \
    </dev/null >"$clog" 2>&1 &
  qemu=$!
  trap 'kill "$qemu" 2>/dev/null || true' EXIT
  boot_failed=""
  show_new() { # prints result lines not printed yet
    lines=$(tr -d '\r' < "$clog" | grep -a '^PODVISOR-VM: ' || true)
    [ -n "$lines" ] || return 0
    n=$(printf '%s\n' "$lines" | wc -l)
    if [ "$n" -gt "$printed" ]; then
      printf '%s\n' "$lines" | tail -n +"$((printed + 1))" |
        sed "s/^PODVISOR-VM: /  [$(( $(date +%s) - t_boot )) s] /"
      printed=$n
    fi
  }
  while kill -0 "$qemu" 2>/dev/null; do
    sleep 1
    show_new
    elapsed=$(( $(date +%s) - t_boot ))
    if [ "$elapsed" -ge "$overall_timeout" ]; then
      boot_failed="$name: timeout (${overall_timeout} s)"
    elif [ "$elapsed" -ge "$boot_timeout" ] && ! grep -aq 'PODVISOR-VM: BEGIN' "$clog"; then
      boot_failed="$name: boot timeout (${boot_timeout} s without the guest's BEGIN line)"
    fi
    if [ -n "$boot_failed" ]; then
      kill "$qemu" 2>/dev/null || true
      break
    fi
  done
  wait "$qemu" 2>/dev/null || true
  trap - EXIT
  show_new
  cat "$clog" >> "$console"
  log "$name: $(( $(date +%s) - t_boot )) s"
}
failed=0
problem() { echo "vm-test: $*"; failed=$((failed + 1)); }
if [ -n "$run_scenarios" ]; then
  boot_vm scenarios "podvisor_vm.only=$scenarios_only"
  [ -z "$boot_failed" ] || problem "$boot_failed: qemu killed"
  grep -aq 'PODVISOR-VM: DONE' "$cache/console-scenarios.log" ||
    problem "the guest did not finish its scenarios"
fi
for name in "${run_own[@]}"; do
  boot_vm "$name" "podvisor_vm.only=$name"
  [ -z "$boot_failed" ] || problem "$boot_failed: qemu killed"
  grep -aq 'PODVISOR-VM: DONE' "$cache/console-$name.log" ||
    problem "$name: the guest did not finish"
done
if [ -n "$armhf_only" ]; then
  # podvisor_vm.daemon=armhf: scenarios.sh puts the armv7 podvisor in place of the arm64 one
  boot_vm armhf "podvisor_vm.only=$armhf_only podvisor_vm.daemon=armhf"
  [ -z "$boot_failed" ] || problem "$boot_failed: qemu killed"
  grep -aq 'PODVISOR-VM: DONE' "$cache/console-armhf.log" ||
    problem "armhf: the guest did not finish"
fi
if [ -n "$run_series" ]; then
  disk=$cache/reboot-disk.img
  rm -f "$disk"
  truncate -s "${disk_mb}M" "$disk"
  mkfs.ext4 -q -F "$disk"
  drive=(-drive "file=$disk,format=raw,if=virtio,cache=unsafe")
  t_series=$(date +%s)
  phases=(setup)
  for ((i = 1; i <= cuts; i++)); do phases+=("cut-$i"); done
  phases+=(final)
  for phase in "${phases[@]}"; do
    boot_vm "reboot-$phase" "podvisor_vm.phase=$phase podvisor_vm.cuts=$cuts podvisor_vm.churn=$churn" \
      "${drive[@]}"
    [ -z "$boot_failed" ] || { problem "$boot_failed: qemu killed"; break; }
    case "$phase" in
      cut-*) grep -aq 'PODVISOR-VM: INFO cutting the power' "$cache/console-reboot-$phase.log" ||
        { problem "reboot-$phase: the power was not cut"; break; } ;;
      *) grep -aq 'PODVISOR-VM: DONE' "$cache/console-reboot-$phase.log" ||
        { problem "reboot-$phase: the guest did not finish"; break; } ;;
    esac
  done
  log "reboot series: ${#phases[@]} boots, $cuts power cuts, $(( $(date +%s) - t_series )) s"
fi
t_end=$(date +%s)

# --- 5. verdict -----------------------------------------------------------------------------
results=$(tr -d '\r' < "$console" | grep -a '^PODVISOR-VM: \(PASS\|FAIL\) ' || true)
failed=$((failed + $(printf '%s\n' "$results" | grep -c '^PODVISOR-VM: FAIL ' || true)))
passed=0
for name in "${expected[@]}"; do
  if printf '%s\n' "$results" | grep -qx "PODVISOR-VM: PASS $name"; then
    passed=$((passed + 1))
  elif ! printf '%s\n' "$results" | grep -q "^PODVISOR-VM: FAIL $name:"; then
    echo "  MISSING $name"
    failed=$((failed + 1))
  fi
done
if [ "$failed" -gt 0 ]; then
  echo "---- last 80 console lines ($console) ----"
  tr -d '\r' < "$console" | tail -n 80
  echo "----"
fi
log "$passed/${#expected[@]} scenarios passed; VM $((t_end - t_initrd)) s, total $((t_end - t0)) s"
[ "$failed" -eq 0 ]
