#!/bin/bash
# Builds an OCI image offline from Debian 12's own packages, for the real-workload test
# (tests/real_workloads.rs, docs/real-workloads.md): `apt-get download` of the image's
# packages, `dpkg-deb -x` into a rootfs, the shared libraries `ldd` names for every ELF file
# in it (copied from this host, a Debian 12 whose libraries are the ones the packages were
# built against; a library the host lacks comes from the package's own Depends, downloaded
# and extracted the same way), the users and directories the program needs, then umoci for
# the layer and the config.
#
# Usage: tests/images/build-deb-image.sh IMAGE OUT.tar
#   IMAGE: etcd | haproxy | nginx | mosquitto | node-exporter (the profiles below)
# Then:  podvisor image import OUT.tar --ref <the reference the manifest names>
# DEB_CACHE=dir: where the .debs are downloaded; a .deb already there is reused (default:
# target/deb-images/debs in this checkout).
#
# Each image's config (Entrypoint, Cmd, User) is the one the manifests run with: the manifests
# that set no command (haproxy, nginx, mosquitto, node-exporter's args) rely on the image they
# name, so the profile says which image's default it follows and why.
set -euo pipefail

image=${1:?usage: $0 etcd|haproxy|nginx|mosquitto|node-exporter OUT.tar}
out=${2:?usage: $0 IMAGE OUT.tar}
here=$(cd "$(dirname "$0")" && pwd)
cache=${DEB_CACHE:-$here/../../target/deb-images/debs}

die() {
  echo "$0: $*" >&2
  exit 1
}

for tool in apt-get apt-cache dpkg-deb dpkg-query ldd umoci tar; do
  command -v "$tool" >/dev/null 2>&1 || die "missing $tool (apt-get install umoci; dpkg, apt and libc-bin are Debian's own)"
done

# The profiles. packages: what is extracted into the rootfs. users: "name:uid:gid:home"
# lines for /etc/passwd and /etc/group (root, nobody and nogroup are always there). dirs:
# "path:mode:uid" directories the program writes at run time (as the package's postinst or
# systemd unit creates them). links: "path:target" symbolic links (where the image the
# manifests name has the program). post_extract: what the package's maintainer scripts do
# that the image needs. The config: Entrypoint, Cmd (one argument per array element), User.
users=()
dirs=()
links=()
post_extract() { :; }
entrypoint=()
cmd=()
user=""
case $image in
  etcd)
    # registry.k8s.io/etcd runs etcd as root, and kubeadm relies on it: its data dir is a
    # DirectoryOrCreate hostPath (root, 0755). The manifests set the command (`etcd ...`);
    # the default Cmd is Debian's ExecStart (etcd.service runs it as user etcd). That image
    # has etcd and etcdctl in /usr/local/bin and a /bin/sh: the GCE manifest runs
    # `/bin/sh -c "... exec /usr/local/bin/etcd ..."` and probes with etcdctl.
    packages=(etcd-server etcd-client dash)
    links=("/usr/local/bin/etcd:/usr/bin/etcd" "/usr/local/bin/etcdctl:/usr/bin/etcdctl")
    cmd=(/usr/bin/etcd)
    ;;
  haproxy)
    # The manifests set no command and mount their haproxy.cfg where the Docker library's
    # haproxy image reads it (/usr/local/etc/haproxy/haproxy.cfg); that image's entrypoint
    # runs `haproxy -W -db -f ...` (master-worker, never a daemon: kubeadm's haproxy.cfg says
    # `daemon`). Debian's haproxy.service runs `haproxy -Ws -f /etc/haproxy/haproxy.cfg`.
    packages=(haproxy)
    users=("haproxy:99:99:/var/lib/haproxy")
    dirs=("/var/lib/haproxy:0755:99" "/run/haproxy:0755:0")
    cmd=(haproxy -W -db -f /usr/local/etc/haproxy/haproxy.cfg)
    ;;
  nginx)
    # The Docker library's nginx image runs `nginx -g 'daemon off;'` (Debian's nginx.service
    # forks: `daemon on`). Debian's /etc/nginx (nginx-common) is the default configuration;
    # the stream module is Debian's dynamic module (libnginx-mod-stream). That image is
    # Debian's, with a /bin/sh (the Kubernetes docs' lifecycle hooks run it): dash.
    packages=(nginx nginx-common libnginx-mod-stream dash)
    users=("www-data:33:33:/var/www")
    dirs=("/var/lib/nginx:0755:0" "/var/log/nginx:0755:0" "/run:0755:0" "/var/www/html:0755:0")
    # nginx-common's postinst enables the default site; nginx's copies the welcome page.
    links=("/etc/nginx/sites-enabled/default:/etc/nginx/sites-available/default")
    post_extract() {
      cp "$rootfs/usr/share/nginx/html/index.html" "$rootfs/var/www/html/index.nginx-debian.html"
    }
    cmd=(nginx -g "daemon off;")
    ;;
  mosquitto)
    # Debian's mosquitto.service: `mosquitto -c /etc/mosquitto/mosquitto.conf`, its
    # ExecStartPre directories owned by the mosquitto user. The user's uid is the
    # eclipse-mosquitto image's (1883), which the manifests name in runAsUser.
    packages=(mosquitto)
    users=("mosquitto:1883:1883:/var/lib/mosquitto")
    dirs=("/var/lib/mosquitto:0755:1883" "/var/log/mosquitto:0740:1883" "/run/mosquitto:0740:1883")
    cmd=(/usr/sbin/mosquitto -c /etc/mosquitto/mosquitto.conf)
    user=mosquitto
    ;;
  node-exporter)
    # The manifests set only args: the Entrypoint is the binary (Debian's ExecStart, as
    # prom/node-exporter's ENTRYPOINT is its /bin/node_exporter), the User Debian's
    # (prometheus-node-exporter.service: User=prometheus).
    packages=(prometheus-node-exporter)
    users=("prometheus:998:998:/var/lib/prometheus")
    entrypoint=(/usr/bin/prometheus-node-exporter)
    user=prometheus
    ;;
  *) die "unknown image '$image' (etcd, haproxy, nginx, mosquitto, node-exporter)" ;;
esac

mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Downloads the .debs of packages $@ that are not in the cache yet, in one apt-get call (APT's
# sandbox user cannot write to a root-owned cache: as root). A machine whose package lists
# are missing or stale (a version no longer on the mirror): one `apt-get update`, then again.
fetch() {
  local missing=() p
  for p in "$@"; do
    [ -n "$(find "$cache" -maxdepth 1 -name "${p}_*.deb" -print -quit)" ] || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  (cd "$cache" && apt-get -o APT::Sandbox::User=root download -qq "${missing[@]}") >&2 ||
    { apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 &&
      (cd "$cache" && apt-get -o APT::Sandbox::User=root download -qq "${missing[@]}") >&2; } ||
    die "apt-get download ${missing[*]} failed (after apt-get update)"
}

# The cached .deb of package $1 (fetched before).
deb_of() {
  local deb
  deb=$(find "$cache" -maxdepth 1 -name "${1}_*.deb" -print -quit)
  [ -n "$deb" ] || die "no ${1}_*.deb in $cache after apt-get download $1"
  echo "$deb"
}

# The rootfs: the packages' files, then Debian 12's merged-/usr layout (/bin, /sbin, /lib,
# /lib64 are links into /usr), as on the host the libraries come from.
umoci init --layout "$work/oci"
umoci new --image "$work/oci:latest"
umoci unpack --image "$work/oci:latest" "$work/bundle" >/dev/null
rootfs=$work/bundle/rootfs
fetch "${packages[@]}"
for pkg in "${packages[@]}"; do
  dpkg-deb -x "$(deb_of "$pkg")" "$rootfs" || die "dpkg-deb -x of $pkg failed"
done
mkdir -p "$rootfs/usr/bin" "$rootfs/usr/sbin" "$rootfs/usr/lib" "$rootfs/usr/lib64"
for d in bin sbin lib lib64; do
  if [ -d "$rootfs/$d" ] && [ ! -L "$rootfs/$d" ]; then
    cp -a "$rootfs/$d/." "$rootfs/usr/$d/"
    rm -rf "${rootfs:?}/$d"
  fi
  ln -s "usr/$d" "$rootfs/$d"
done

# Libraries the host lacks: the packages' Depends (first alternatives) that are not installed
# here, and theirs, level by level, extracted into a staging tree that ldd searches before
# the host.
staging=$work/staging
mkdir -p "$staging"
declare -A seen=()
for pkg in "${packages[@]}"; do seen[$pkg]=1; done
level=("${packages[@]}")
while [ ${#level[@]} -gt 0 ]; do
  next=()
  for pkg in "${level[@]}"; do
    deb=$(deb_of "$pkg")
    depends="$(dpkg-deb -f "$deb" Depends),$(dpkg-deb -f "$deb" Pre-Depends)"
    IFS=',' read -ra alts <<<"$depends"
    for alt in "${alts[@]}"; do
      dep=$(sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/ //g' <<<"$alt")
      [ -n "$dep" ] && [ -z "${seen[$dep]:-}" ] || continue
      seen[$dep]=1
      # A package installed here needs nothing from the archive.
      status=$(dpkg-query -W -f='${Status}' "$dep" 2>/dev/null || true)
      [ "$status" = "install ok installed" ] || next+=("$dep")
    done
  done
  [ ${#next[@]} -gt 0 ] || break
  # A purely virtual name (nginx-abi-*, provided by nginx itself) has no candidate and no
  # .deb. One apt-cache call for the level (each call reads the whole package cache).
  mapfile -t next < <(apt-cache policy "${next[@]}" |
    awk '/^[^ ]/ { name = $1; sub(/:$/, "", name) } /^  Candidate: / && $2 != "(none)" { print name }')
  [ ${#next[@]} -gt 0 ] || break
  fetch "${next[@]}"
  for dep in "${next[@]}"; do
    dpkg-deb -x "$(deb_of "$dep")" "$staging" || die "dpkg-deb -x of $dep failed"
  done
  level=("${next[@]}")
done
libpath=$(find "$staging" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)

# Every ELF file of the rootfs (programs and dlopen'ed modules): the libraries ldd names,
# copied to the path ldd names (a staging path is mapped back to its place in /).
is_elf() { [ "$(head -c 4 "$1" | tr -d '\0')" = $'\x7fELF' ]; }
mapfile -t elves < <(find "$rootfs" -type f \( -perm -u+x -o -name '*.so*' \) | while read -r f; do is_elf "$f" && echo "$f"; done)
[ ${#elves[@]} -gt 0 ] || die "no ELF file in the packages of $image (${packages[*]})"
for elf in "${elves[@]}"; do
  # ldd of a static binary says "not a dynamic executable" and fails: nothing to copy.
  list=$(LD_LIBRARY_PATH=$libpath ldd "$elf" 2>&1) || continue
  if grep -q 'not found' <<<"$list"; then
    die "ldd ${elf#"$rootfs"}: $(grep 'not found' <<<"$list" | tr -s ' \t' ' ' | tr '\n' ';') (in no Depends of ${packages[*]} nor on this host)"
  fi
  for lib in $(awk '/=> \// { print $3 } /^\t\// { print $1 }' <<<"$list"); do
    dest=${lib#"$staging"}
    mkdir -p "$rootfs$(dirname "$dest")"
    [ -e "$rootfs$dest" ] || cp -L "$lib" "$rootfs$dest" || die "copy $lib (ldd of ${elf#"$rootfs"})"
  done
done

# Users, groups, /tmp and the run-time directories.
mkdir -p "$rootfs/etc" "$rootfs/tmp" "$rootfs/root"
chmod 1777 "$rootfs/tmp"
passwd='root:x:0:0:root:/root:/bin/sh'
group='root:x:0:'
for u in ${users[@]+"${users[@]}"}; do
  IFS=: read -r name uid gid home <<<"$u"
  passwd+=$'\n'"$name:x:$uid:$gid::$home:/usr/sbin/nologin"
  group+=$'\n'"$name:x:$gid:"
done
printf '%s\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' "$passwd" >"$rootfs/etc/passwd"
printf '%s\nnogroup:x:65534:\n' "$group" >"$rootfs/etc/group"
for d in ${dirs[@]+"${dirs[@]}"}; do
  IFS=: read -r path mode uid <<<"$d"
  mkdir -p "$rootfs$path"
  chmod "$mode" "$rootfs$path"
  chown "$uid:$uid" "$rootfs$path"
done
for l in ${links[@]+"${links[@]}"}; do
  IFS=: read -r path target <<<"$l"
  [ -e "$rootfs$target" ] || die "link $path: $target is not in the packages of $image"
  mkdir -p "$rootfs$(dirname "$path")"
  ln -sfn "$target" "$rootfs$path"
done
post_extract

umoci repack --image "$work/oci:latest" "$work/bundle"
config=(--architecture "$(dpkg --print-architecture)"
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for a in ${entrypoint[@]+"${entrypoint[@]}"}; do config+=(--config.entrypoint "$a"); done
for a in ${cmd[@]+"${cmd[@]}"}; do config+=(--config.cmd "$a"); done
[ -z "$user" ] || config+=(--config.user "$user")
umoci config --image "$work/oci:latest" "${config[@]}"
umoci gc --layout "$work/oci"
mkdir -p "$(dirname "$out")"
tar -C "$work/oci" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "wrote $out ($image: ${packages[*]})"
