#!/bin/bash
# The .deb on a real systemd: boots a Debian 12 system (debootstrap'ed rootfs on an ext4 disk,
# Debian's kernel, systemd as PID 1, pure cgroup v2) under qemu and runs tests/vm/install-guest.sh
# there: install the package (pods from /etc/kubernetes/manifests run, the unit is enabled
# and reports READY/STATUS), upgrade to a newer revision (the daemon restarts, every container
# keeps its pid), wedge the sync loop (the watchdog restarts the daemon, containers keep their
# pids), switch to cgroupDriver: systemd (pods are slices and containers scopes in
# `systemctl status podvisor.slice`, limits in `systemctl show`, a restart keeps the containers,
# a removed manifest stops its units), remove (the service is gone), purge. One "PODVISOR-VM: PASS|FAIL name" line per step.
#
# Usage (as root): tests/vm/install.sh [DEB-REV1 DEB-REV2]
#   default: target/packages/podvisor_*-1_amd64.deb and -2, built with
#   `packaging/build-packages.sh -a amd64 -r 1` and `-r 2` when missing.
# Needs: debootstrap, qemu-system-x86, e2fsprogs, cpio, busybox-static, umoci, python3.
# The rootfs is debootstrap'ed once (~2 min, Debian's registry) and cached in
# $PODVISOR_VM_CACHE/debian12-rootfs (default target/vm-cache); the kernel is tests/vm's.
# Knobs: PODVISOR_VM_CACHE, PODVISOR_VM_TIMEOUT (default 600 s), PODVISOR_VM_MEM (1024).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
PODVISOR_VM_ARCH=amd64
# shellcheck source=tests/vm/arch.sh
. "$here/arch.sh" # vm_add_module
cache=${PODVISOR_VM_CACHE:-$repo/target/vm-cache}
timeout=${PODVISOR_VM_TIMEOUT:-600}
mem=${PODVISOR_VM_MEM:-1024}
log() { echo "install-test: $*"; }
die() { echo "install-test: error: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "must run as root"
for tool in debootstrap qemu-system-x86_64 mkfs.ext4 cpio busybox umoci python3; do
  command -v "$tool" >/dev/null || die "missing $tool (apt-get install debootstrap qemu-system-x86 e2fsprogs cpio busybox-static umoci python3)"
done
t0=$(date +%s)

# --- packages -------------------------------------------------------------------------------
deb1=${1:-}
deb2=${2:-}
if [ -z "$deb1" ]; then
  for rev in 1 2; do
    if ! ls "$repo"/target/packages/podvisor_*-"$rev"_amd64.deb >/dev/null 2>&1; then
      "$repo/packaging/build-packages.sh" -a amd64 -r "$rev" --no-lint
    fi
  done
  deb1=$(ls "$repo"/target/packages/podvisor_*-1_amd64.deb | tail -n1)
  deb2=$(ls "$repo"/target/packages/podvisor_*-2_amd64.deb | tail -n1)
fi
[ -f "$deb1" ] && [ -f "$deb2" ] || die "packages $deb1 $deb2 not found"

# --- kernel (tests/vm/run.sh's cache) and rootfs --------------------------------------------
mkdir -p "$cache"
kernel_dir=$(find "$cache" -maxdepth 1 -type d -name 'kernel-*-amd64' | sort | tail -n1)
if [ -z "$kernel_dir" ]; then
  log "no cached kernel: running tests/vm/run.sh once to fetch it"
  PODVISOR_VM_ONLY=qos-besteffort "$here/run.sh" >/dev/null || true
  kernel_dir=$(find "$cache" -maxdepth 1 -type d -name 'kernel-*-amd64' | sort | tail -n1)
  [ -n "$kernel_dir" ] || die "no kernel under $cache"
fi
kver=$(cat "$kernel_dir/version")
# The package's dependencies beyond minbase: libseccomp2, and the pod network's plugins and
# iptables (the cache directory is named after the list, so a change makes a new rootfs).
include=systemd,systemd-sysv,libseccomp2,kmod,procps,init-system-helpers,containernetworking-plugins,iptables
rootfs=$cache/debian12-rootfs-$(echo "$include" | cksum | cut -d' ' -f1)
if [ ! -x "$rootfs/lib/systemd/systemd" ]; then
  log "debootstrap of Debian 12 (first run only)"
  rm -rf "$rootfs.partial"
  debootstrap --variant=minbase --include="$include" \
    bookworm "$rootfs.partial" http://deb.debian.org/debian >/dev/null || die "debootstrap failed"
  mv "$rootfs.partial" "$rootfs"
fi
t_prep=$(date +%s)

# --- the disk: rootfs + kernel modules + the test -------------------------------------------
work=$(mktemp -d "$cache/install.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/root
cp -a "$rootfs" "$stage"
mkdir -p "$stage/lib/modules"
cp -a "$kernel_dir/modules" "$stage/lib/modules/$kver"
chroot "$stage" depmod "$kver" # the rootfs's own kmod
mkdir -p "$stage/vm"
cp "$deb1" "$stage/vm/podvisor-1.deb"
cp "$deb2" "$stage/vm/podvisor-2.deb"
"$repo/tests/images/build-multiarch.sh" "$stage/vm/multiarch.tar" >/dev/null
cp "$here/install-guest.sh" "$stage/vm/install-guest.sh"
chmod 755 "$stage/vm/install-guest.sh"
echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" > "$stage/etc/fstab"
echo podvisor-vm > "$stage/etc/hostname"
echo "127.0.0.1 localhost podvisor-vm" > "$stage/etc/hosts"
cat > "$stage/etc/systemd/system/podvisor-install-test.service" <<'EOF'
[Unit]
Description=podvisor package test (tests/vm/install-guest.sh)
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/vm/install-guest.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
[Install]
WantedBy=multi-user.target
EOF
ln -s /etc/systemd/system/podvisor-install-test.service \
  "$stage/etc/systemd/system/multi-user.target.wants/podvisor-install-test.service"
# Nothing on the console but the test; no timers or gettys competing for the emulated CPUs.
for unit in getty@tty1.service serial-getty@ttyS0.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer fstrim.timer systemd-timesyncd.service; do
  ln -sf /dev/null "$stage/etc/systemd/system/$unit"
done
disk=$work/disk.img
mkfs.ext4 -q -F -d "$stage" -L root "$disk" 1G

# --- initramfs: load the virtio disk and ext4 modules, mount /dev/vda, hand over to systemd --
init=$work/initramfs
mkdir -p "$init"/{bin,dev,proc,sys,newroot,modules}
cp "$(command -v busybox)" "$init/bin/busybox"
for a in sh mount insmod switch_root sleep; do ln -s busybox "$init/bin/$a"; done
: > "$init/modules/order"
for m in virtio_pci virtio_blk crc32c_generic ext4; do vm_add_module "$init/modules" "$m"; done
cat > "$init/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/modules/$m" 2>/dev/null; done < /modules/order
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do [ -b /dev/vda ] && break; sleep 0.5; done
mount -t ext4 /dev/vda /newroot || { echo "PODVISOR-VM: FAIL boot: cannot mount /dev/vda"; exec sh; }
umount /proc
exec switch_root /newroot /sbin/init
EOF
chmod 755 "$init/init"
(cd "$init" && find . -mindepth 1 | cpio -o -H newc -R 0:0 --quiet) > "$work/initrd.cpio"
t_disk=$(date +%s)
log "kernel $kver, disk $(du -sm "$disk" | cut -f1) MiB; packages and rootfs $((t_prep - t0)) s, disk $((t_disk - t_prep)) s"

# --- boot -----------------------------------------------------------------------------------
console=$cache/console-install.log
# The guest reports a hang itself (tests/vm/install-guest.sh's hang_report) this long after its
# boot, well before qemu's timeout: the minute left covers the boot and the report.
hang=$((timeout > 180 ? timeout - 60 : timeout * 2 / 3))
log "booting Debian 12 with systemd (qemu software emulation; console log: $console)"
timeout "$timeout" qemu-system-x86_64 -nographic -no-reboot -nic none -m "$mem" -smp 2 \
  -kernel "$kernel_dir/vmlinuz" -initrd "$work/initrd.cpio" \
  -drive "file=$disk,format=raw,if=virtio,cache=unsafe" \
  -append "console=ttyS0 quiet loglevel=3 systemd.show_status=false panic=-1 rw podvisor_vm.hang=$hang" \
  </dev/null >"$console" 2>&1 || log "qemu ended with $? (124: the $timeout s timeout)"
t_end=$(date +%s)
results=$(tr -d '\r' < "$console" | grep -a '^PODVISOR-VM: ' || true)
printf '%s\n' "$results" | sed 's/^PODVISOR-VM: /  /'
failed=0
for step in install ready-status upgrade-keeps-containers watchdog-restart systemd-driver remove purge; do
  # (here-strings, not `printf | grep -q`: with pipefail, grep -q quitting early makes printf
  # die of SIGPIPE on long results and a passed step was reported MISSING)
  if ! grep -qx "PODVISOR-VM: PASS $step" <<<"$results"; then
    grep -q "^PODVISOR-VM: FAIL $step" <<<"$results" || echo "  MISSING $step"
    failed=$((failed + 1))
  fi
done
if [ "$failed" -gt 0 ]; then
  echo "---- last 60 console lines ($console) ----"
  tr -d '\r' < "$console" | tail -n 60
fi
log "$((7 - failed))/7 steps passed; VM $((t_end - t_disk)) s, total $((t_end - t0)) s"
[ "$failed" -eq 0 ]
