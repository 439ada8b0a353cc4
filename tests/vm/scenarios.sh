#!/bin/sh
# cgroup v2 scenarios, run inside the test VM by /init (busybox sh) on a pure cgroup v2 tree:
# a podvisor daemon watches a manifest directory; each scenario writes manifests, reads pod
# status from `podvisor pods -o json` and cgroup files directly, and prints exactly one line:
#   PODVISOR-VM: PASS <name>      or      PODVISOR-VM: FAIL <name>: <why>
# Expected values follow the kubelet's conversions (pkg/kubelet/cm): cpu request -> shares
# (1024 per cpu, min 2) -> cpu.weight = 1 + (shares-2)*9999/262142; cpu limit -> cpu.max
# "<quota> 100000"; memory limit -> memory.max, memory.swap.max 0; pod cgroups under
# podvisor/ (Guaranteed), podvisor/burstable/, podvisor/besteffort/.

CG=/sys/fs/cgroup
PARENT=podvisor
MANIFESTS=/etc/kubernetes/manifests
SRC=/vm/manifests
DAEMON_LOG=/var/log/podvisor-daemon.log
PIDS_LIMIT=$(sed -n 's/^podPidsLimit: *//p' /vm/kubelet-config.yaml)
CYCLE_ROUNDS=5
CYCLE_PODS=10

say() { echo "PODVISOR-VM: $*"; }
# In the armhf boot (podvisor_vm.daemon=armhf, arm64 guest) every result is named armhf-<name>
# and no scenario passes unless the daemon really is the 32-bit ARM build ($ARCH_ERR).
PREFIX="" ARCH_ERR=""
pass() {
  if [ -n "$ARCH_ERR" ]; then fail "$1" "$ARCH_ERR"; else say "PASS $PREFIX$1"; fi
}
fail() { say "FAIL $PREFIX$1: $2"; failures=$((failures + 1)); }
failures=0
now() { date +%s; }
ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }

# wait_until SECONDS CMD...: runs CMD every 0.5 s until it succeeds; 1 on timeout. Polls are
# not free: one `podvisor pods` costs a debug binary's exec under software emulation.
wait_until() {
  _end=$(($(now) + $1))
  shift
  until "$@"; do
    [ "$(now)" -ge "$_end" ] && return 1
    sleep 0.5
  done
  return 0
}

# --- pod status from the daemon ------------------------------------------------------------
pod_json() { podvisor pods "$1" -o json 2>/dev/null; }
# first "KEY": "VALUE" of the pretty-printed JSON on stdin
field() { sed -n "s/^ *\"$1\": \"\([^\"]*\)\".*/\1/p" | head -n1; }
pod_field() { pod_json "$1" | field "$2"; }
pod_uid() { pod_field "$1" uid; }
pod_running() { [ "$(pod_field "$1" phase)" = Running ]; }
pod_gone() { ! podvisor pods "$1" >/dev/null 2>&1; }
# container id of container $2 of pod $1 (status.containerStatuses[].containerID)
container_id() {
  pod_json "$1" | awk -v c="$2" '
    /"containerID":/ && id == "" { id = $2; gsub(/[",]/, "", id); sub(/^podvisor:\/\//, "", id) }
    /"name":/ { n = $2; gsub(/[",]/, "", n); if (n == c && id != "") { print id; exit }; id = "" }'
}

# --- cgroups -------------------------------------------------------------------------------
# the pod cgroup of pod UID $1, whatever its QoS tier
pod_cgroup() {
  for _d in "$CG/$PARENT/pod$1" "$CG/$PARENT/burstable/pod$1" "$CG/$PARENT/besteffort/pod$1"; do
    [ -d "$_d" ] && { echo "$_d"; return 0; }
  done
  return 1
}
# expect FILE VALUE: appends a mismatch to $errs
expect() {
  if [ -e "$1" ]; then _got=$(cat "$1"); else _got="<missing>"; fi
  [ "$_got" = "$2" ] || errs="$errs ${1#"$CG"/}=\"$_got\" (want \"$2\");"
}
# the first process of cgroup $1
first_pid() { head -n1 "$1/cgroup.procs" 2>/dev/null; }
# every cgroup directory left under podvisor's parent, QoS tier directories excepted
leftover_cgroups() {
  find "$CG/$PARENT" -mindepth 1 -type d 2>/dev/null |
    grep -v -x -e "$CG/$PARENT/burstable" -e "$CG/$PARENT/besteffort"
}

# kubelet: MilliCPUToShares then CpuSharesToCpuWeight
weight_for_milli() {
  _shares=$(($1 * 1024 / 1000))
  [ "$_shares" -lt 2 ] && _shares=2
  echo $((1 + ((_shares - 2) * 9999) / 262142))
}

start_pod() { cp "$SRC/$1.yaml" "$MANIFESTS/$1.yaml"; }

# checks the common part of a QoS scenario and sets $uid, $podcg, $ccg, $errs
qos_common() { # NAME QOSCLASS TIER_DIR
  errs=""
  uid="" podcg="" ccg=""
  if ! wait_until 60 pod_running "$1"; then
    errs="pod not Running after 60 s (phase $(pod_field "$1" phase))"
    return 1
  fi
  uid=$(pod_uid "$1")
  _q=$(pod_field "$1" qosClass)
  [ "$_q" = "$2" ] || errs="$errs status.qosClass=\"$_q\" (want $2);"
  podcg=$(pod_cgroup "$uid")
  if [ -z "$podcg" ]; then
    errs="$errs no pod cgroup pod$uid under $CG/$PARENT;"
    return 1
  fi
  [ "$podcg" = "$CG/$PARENT$3/pod$uid" ] || errs="$errs pod cgroup at ${podcg#"$CG"/} (want $PARENT$3/pod$uid);"
  _id=$(container_id "$1" main)
  ccg="$podcg/$_id"
  if [ -z "$_id" ] || [ ! -d "$ccg" ]; then
    errs="$errs no container cgroup $ccg;"
    return 1
  fi
  return 0
}
report() { # NAME: PASS if $errs is empty
  if [ -z "$errs" ]; then pass "$1"; else fail "$1" "$errs"; fi
}

oom_adj_of() { cat "/proc/$(first_pid "$1")/oom_score_adj" 2>/dev/null; }

scenario_qos_guaranteed() {
  n=qos-guaranteed
  if qos_common $n Guaranteed ""; then
    w=$(weight_for_milli 200)
    expect "$ccg/cpu.max" "20000 100000"
    expect "$ccg/cpu.weight" "$w"
    expect "$ccg/memory.max" 67108864
    expect "$ccg/memory.swap.max" 0
    expect "$podcg/cpu.max" "20000 100000"
    expect "$podcg/cpu.weight" "$w"
    expect "$podcg/memory.max" 67108864
    expect "$podcg/pids.max" "$PIDS_LIMIT"
    _a=$(oom_adj_of "$ccg")
    [ "$_a" = -997 ] || errs="$errs oom_score_adj=$_a (want -997);"
    # the container runs the image's busybox, built for the machine podvisor is built for
    _c=$(file_arch "/proc/$(first_pid "$ccg")/exe")
    [ "$_c" = "$(file_arch /usr/bin/podvisor)" ] || errs="$errs the container runs a $_c binary (want $(file_arch /usr/bin/podvisor));"
  fi
  report $n
}

scenario_qos_burstable() {
  n=qos-burstable
  if qos_common $n Burstable /burstable; then
    w=$(weight_for_milli 100)
    expect "$ccg/cpu.max" "max 100000"
    expect "$ccg/cpu.weight" "$w"
    expect "$ccg/memory.max" 67108864
    expect "$ccg/memory.swap.max" 0
    expect "$podcg/cpu.max" "max 100000"
    expect "$podcg/cpu.weight" "$w"
    expect "$podcg/memory.max" 67108864
    expect "$podcg/pids.max" "$PIDS_LIMIT"
    # kubelet: 1000 - 1000*memoryRequest/memoryCapacity, within [3, 999]
    _cap=$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) * 1024))
    _want=$((1000 - (1000 * 33554432) / _cap))
    [ "$_want" -lt 3 ] && _want=3
    [ "$_want" -ge 1000 ] && _want=999
    _a=$(oom_adj_of "$ccg")
    [ "$_a" = "$_want" ] || errs="$errs oom_score_adj=$_a (want $_want);"
  fi
  report $n
}

scenario_qos_besteffort() {
  n=qos-besteffort
  if qos_common $n BestEffort /besteffort; then
    expect "$ccg/cpu.max" "max 100000"
    expect "$ccg/cpu.weight" 1
    expect "$ccg/memory.max" max
    expect "$podcg/cpu.weight" 1
    expect "$podcg/memory.max" max
    expect "$podcg/pids.max" "$PIDS_LIMIT"
    _a=$(oom_adj_of "$ccg")
    [ "$_a" = 1000 ] || errs="$errs oom_score_adj=$_a (want 1000);"
  fi
  report $n
}

terminated_reason() { # POD: the reason of the first terminated state
  pod_json "$1" | awk '/"terminated":/ { t = 1 } t && /"reason":/ { r = $2; gsub(/[",]/, "", r); print r; exit }'
}
has_terminated() { [ -n "$(terminated_reason "$1")" ]; }

scenario_oom() { # NAME
  n=$1
  if ! wait_until 60 has_terminated $n; then
    fail $n "container not terminated after 60 s (phase $(pod_field $n phase))"
    return
  fi
  r=$(terminated_reason $n)
  if [ "$r" = OOMKilled ]; then pass $n; else fail $n "terminated with reason $r (want OOMKilled)"; fi
}

bomb_done() { podvisor logs pids-limit -c bomb 2>/dev/null | grep -q -e "can't fork" -e "bomb not stopped"; }
scenario_pids_limit() {
  n=pids-limit errs=""
  if ! wait_until 60 bomb_done; then
    fail $n "no fork bomb outcome in the bomb container's log after 60 s"
    return
  fi
  out=$(podvisor logs pids-limit -c bomb 2>&1 | tail -n 2 | tr '\n' ' ')
  podvisor logs pids-limit -c bomb 2>/dev/null | grep -q "can't fork" ||
    errs="$errs the fork bomb was not stopped: $out;"
  uid=$(pod_uid $n)
  if podcg=$(pod_cgroup "$uid"); then
    expect "$podcg/pids.max" "$PIDS_LIMIT"
  else
    errs="$errs no pod cgroup pod$uid;"
  fi
  report $n
}

throttled() { [ "$(sed -n 's/^nr_throttled //p' "$ccg/cpu.stat" 2>/dev/null)" -gt 0 ] 2>/dev/null; }
scenario_cpu_throttled() {
  n=cpu-throttled errs=""
  if qos_common $n Guaranteed ""; then
    expect "$ccg/cpu.max" "10000 100000"
    if ! wait_until 30 throttled; then
      errs="$errs cpu.stat: $(tr '\n' ' ' < "$ccg/cpu.stat") (want nr_throttled > 0);"
    fi
  fi
  report $n
}

refused_as() { [ "$(pod_field "$1" phase)" = Failed ] && pod_json "$1" | grep -q "\"reason\": \"$2\""; }
scenario_refused() { # NAME REASON
  n=$1 errs=""
  if ! wait_until 30 refused_as $n "$2"; then
    errs="phase $(pod_field $n phase), reason $(pod_field $n reason) after 30 s (want Failed, $2);"
  fi
  uid=$(pod_uid $n)
  if [ -n "$uid" ] && pod_cgroup "$uid" >/dev/null; then
    errs="$errs a refused pod has a cgroup;"
  fi
  report $n
}

pod_log() { podvisor logs "$1" -c main 2>/dev/null; }
log_has() { pod_log "$1" | grep -q -e "$2"; }
# wait_terminated POD: once its container ended, $out holds its log on one line; otherwise
# $errs says so and it returns 1
wait_terminated() {
  if wait_until 60 has_terminated "$1"; then
    out=$(pod_log "$1" | tr '\n' ' ')
    return 0
  fi
  errs="not terminated after 60 s (phase $(pod_field "$1" phase));"
  return 1
}

# Issue 11: mknod of the host's /dev/ram0 works, opening it is denied by the eBPF filter.
scenario_device_filter() {
  n=device-filter errs=""
  if ! dd if=/dev/ram0 of=/dev/null bs=512 count=1 2>/dev/null; then
    errs="the VM itself cannot read /dev/ram0 (brd not loaded?);"
  elif ! wait_until 60 log_has $n done; then
    errs="no outcome in the log after 60 s (phase $(pod_field $n phase));"
  else
    out=$(pod_log $n | tr '\n' ' ')
    log_has $n mknod-ok || errs="$errs mknod failed: $out;"
    log_has $n "can't open '/tmp/d': Operation not permitted" ||
      errs="$errs the device was not refused with EPERM: $out;"
  fi
  report $n
}

scenario_privileged_device() {
  n=privileged-device errs=""
  if wait_terminated $n; then
    log_has $n read-ok || errs="$errs /dev/ram0 not readable: $out;"
    log_has $n kcore-read || errs="$errs /proc/kcore not readable (an AppArmor profile?): $out;"
    log_has $n podvisor-default && errs="$errs a privileged container got the default profile: $out;"
  fi
  report $n
}

# The default AppArmor profile on the container's process and on an exec'd command.
scenario_apparmor_default() {
  n=apparmor-default errs=""
  if ! wait_until 60 pod_running $n; then
    errs="pod not Running after 60 s (phase $(pod_field $n phase));"
  else
    uid=$(pod_uid $n)
    ccg="$(pod_cgroup "$uid")/$(container_id $n main)"
    pid=$(first_pid "$ccg")
    got=$(cat "/proc/$pid/attr/current" 2>&1)
    [ "$got" = "podvisor-default (enforce)" ] || errs="$errs container process profile \"$got\";"
    got=$(podvisor exec $n -- cat /proc/self/attr/current 2>&1)
    [ "$got" = "podvisor-default (enforce)" ] || errs="$errs exec profile \"$got\";"
    grep -q '^podvisor-default (enforce)$' /sys/kernel/security/apparmor/profiles ||
      errs="$errs podvisor-default not loaded;"
  fi
  report $n
}

# A Localhost profile applies, even to a privileged container; a missing one is refused by
# `podvisor validate`, naming the field.
scenario_apparmor_localhost() {
  n=apparmor-localhost errs=""
  if wait_terminated $n; then
    log_has $n "^podvisor-default (enforce)" || errs="$errs profile not applied: $out;"
    log_has $n kcore-denied || errs="$errs /proc/kcore readable under the profile: $out;"
  fi
  if v=$(podvisor validate /vm/apparmor-missing.yaml 2>&1); then
    errs="$errs validate accepted a missing profile: $v;"
  else
    echo "$v" | grep -q 'spec.containers\[0\].securityContext.appArmorProfile: AppArmor profile "no-such-profile" is not loaded' ||
      errs="$errs validate said: $v;"
  fi
  report $n
}

# The multi-platform image: the import picked the entry of the index for the machine podvisor
# runs as (the armhf boot's armv7 podvisor on the arm64 kernel: linux/arm/v7).
scenario_multiarch_image() {
  n=multiarch-image errs=""
  case "$(file_arch /usr/bin/podvisor)-$(uname -m)" in
    "32-bit ARM-"*) want=linux/arm/v7 ;;
    *-aarch64) want=linux/arm64/v8 ;;
    *-x86_64) want=linux/amd64 ;;
    *) want="unknown machine $(uname -m)" ;;
  esac
  if ! wait_until 60 log_has $n linux/; then
    errs="no platform in the log after 60 s (phase $(pod_field $n phase));"
  else
    got=$(pod_log $n | head -n1)
    [ "$got" = "$want" ] || errs="$errs the container runs the $got image (want $want);"
  fi
  report $n
}

file_arch() { # the ELF class and machine of FILE, from its header (busybox has no file(1))
  case "$(od -An -tx1 -j4 -N1 "$1" 2>/dev/null | tr -d ' ')-$(od -An -tx1 -j18 -N1 "$1" 2>/dev/null | tr -d ' ')" in
    01-28) echo "32-bit ARM" ;;
    02-b7) echo "64-bit ARM" ;;
    02-3e) echo "x86-64" ;;
    *) echo "unknown ELF" ;;
  esac
}

# Readiness probes: a tcpSocket probe on busybox httpd, which listens only after 3 s, and an
# exec probe on a file the container creates after 3 s, both under RuntimeDefault seccomp. The
# pod must become Ready (2/2); then the file goes (podvisor exec, itself under the filter) and
# the flag container must turn unready: the probe really runs. The container's process and the
# exec'd one must be filtered (Seccomp: 2).
ready_count() { podvisor pods "$1" 2>/dev/null | awk 'NR == 2 { print $2 }'; }
ready_is() { [ "$(ready_count "$1")" = "$2" ]; }
scenario_probe_ready() {
  n=probe-ready errs=""
  if ! wait_until 90 ready_is $n 2/2; then
    errs="not Ready after 90 s (READY $(ready_count $n), phase $(pod_field $n phase));"
  else
    uid=$(pod_uid $n)
    pid=$(first_pid "$(pod_cgroup "$uid")/$(container_id $n flag)")
    got=$(sed -n 's/^Seccomp:[[:space:]]*//p' "/proc/$pid/status" 2>&1)
    [ "$got" = 2 ] || errs="$errs container process $pid has Seccomp: \"$got\" (want 2, filtered);"
    got=$(podvisor exec $n -c flag -- sh -c 'grep ^Seccomp: /proc/self/status; rm /tmp/ready' 2>&1 | tr -s '\t ' ' ')
    [ "$got" = "Seccomp: 2" ] || errs="$errs exec said \"$got\" (want \"Seccomp: 2\");"
    wait_until 30 ready_is $n 1/2 ||
      errs="$errs READY $(ready_count $n) 30 s after the exec probe's file went (want 1/2);"
  fi
  report $n
}

# A crash and its restart: the container exits 3 at its first start and stays up at the
# second (an emptyDir remembers the crash); after the kubelet's 10 s back-off restartCount is
# 1, the container runs again (a process in its cgroup), lastState says exit code 3, reason
# Error, and logs --previous shows the crashed instance.
restart_count() { pod_json "$1" | sed -n 's/^ *"restartCount": \([0-9]*\).*/\1/p' | head -n1; }
restarted() { [ "$(restart_count "$1")" -ge 1 ] 2>/dev/null && pod_json "$1" | grep -q '"running":'; }
scenario_crash_restart() {
  n=crash-restart errs=""
  if ! wait_until 90 restarted $n; then
    errs="no restart after 90 s (restartCount $(restart_count $n), phase $(pod_field $n phase));"
  else
    c=$(restart_count $n)
    [ "$c" = 1 ] || errs="$errs restartCount $c (want 1);"
    last=$(pod_json $n | awk '/"lastState":/ { l = 1 } l && /"exitCode":/ { e = $2 } l && /"reason":/ { r = $2 }
      l && /"state":/ { gsub(/[",]/, "", e); gsub(/[",]/, "", r); print e "/" r; exit }')
    [ "$last" = 3/Error ] || errs="$errs lastState exit code/reason $last (want 3/Error);"
    prev=$(podvisor logs $n -c main --previous 2>&1 | tr '\n' ' ')
    case "$prev" in *crashing*) ;; *) errs="$errs logs --previous: \"$prev\";" ;; esac
    uid=$(pod_uid $n)
    ccg="$(pod_cgroup "$uid")/$(container_id $n main)"
    [ -n "$(first_pid "$ccg")" ] || errs="$errs no process in the restarted container's cgroup $ccg;"
  fi
  report $n
}

# Boot to pods: a second daemon (own root, manifests, socket and cgroup parent) starts with
# 10 manifests and the multi-platform image only in its preload directory, and no network
# (the VM has no NIC): the time from its start to 10 containers running, and no pull tried.
boot_running() { # PARENT: containers with a process under /sys/fs/cgroup/PARENT
  _n=0
  for _p in "$CG/$1"/pod*/*/cgroup.procs "$CG/$1"/*/pod*/*/cgroup.procs; do
    read -r _pid 2>/dev/null < "$_p" && _n=$((_n + 1))
  done
  echo $_n
}
scenario_boot_to_pods() {
  n=boot-to-pods errs=""
  broot=/var/lib/pv-boot bman=/etc/pv-boot bsock=/run/pv-boot/api.sock bparent=pvboot
  mkdir -p "$broot/images/preload" "$bman"
  cp /vm/images/multiarch.tar "$broot/images/preload/multiarch.tar"
  i=1
  while [ $i -le 10 ]; do
    cat > "$bman/boot-$i.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: boot-$i}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: multiarch:1.0
    command: [sh, -c, 'trap "exit 0" TERM; sleep 1000 & wait']
EOF
    i=$((i + 1))
  done
  bt0=$(ms)
  podvisor --root-dir "$broot" --runtime-dir /run/pv-boot/state --log-dir /var/log/pv-boot \
    --cgroup-parent "$bparent" run \
    --pod-manifest-path "$bman" --api-socket "$bsock" --cni-conf-dir '' >/var/log/pv-boot.log 2>&1 &
  bd=$!
  _end=$(($(now) + 120))
  bfirst=""
  while [ "$(boot_running $bparent)" -lt 10 ] && [ "$(now)" -lt "$_end" ]; do
    [ -z "$bfirst" ] && [ "$(boot_running $bparent)" -ge 1 ] && bfirst=$(ms)
    sleep 0.05
  done
  bt1=$(ms)
  up=$(boot_running $bparent)
  if [ "$up" -lt 10 ]; then
    errs="$up of 10 pods running 120 s after the daemon started: $(tail -n 3 /var/log/pv-boot.log | tr '\n' ' ');"
  else
    say "INFO boot-to-pods: daemon start to 10 pods running: $((bt1 - bt0)) ms, the first after $((${bfirst:-$bt1} - bt0)) ms ($(uname -m), $(nproc) cpus, preloaded image imported at start, no network)"
  fi
  pulls=$(podvisor events --api-socket "$bsock" 2>/dev/null | grep -c Pulling)
  [ "$pulls" = 0 ] || errs="$errs $pulls Pulling events: a pod waited on a registry;"
  rm -f "$bman"/*.yaml
  _end=$(($(now) + 90))
  while [ -n "$(find "$CG/$bparent" -mindepth 1 -name 'pod*' 2>/dev/null)" ] && [ "$(now)" -lt "$_end" ]; do sleep 0.5; done
  kill "$bd" 2>/dev/null
  wait "$bd" 2>/dev/null
  left=$(find "$CG/$bparent" -mindepth 1 -name 'pod*' 2>/dev/null | tr '\n' ' ')
  [ -z "$left" ] || errs="$errs pods left after their manifests went: $left;"
  report $n
}

# No monitor or daemon process may sit in a pod's cgroups (item 1 of issue 5). An exec (an
# exec probe's, every 2 s in probe-ready) is a clone of podvisor in the container's cgroup
# until it execs the command, as runc's `runc init` is for runc exec: a podvisor process
# counts only if it is still there, still podvisor, 3 s later.
podvisor_in_pods() { # pid:cgroup.procs of every podvisor process in a pod's cgroup
  # <pod cgroup>/pod-init holds the shared PID namespace's init (podvisor's binary) by design.
  for procs in $(find "$CG/$PARENT" -name cgroup.procs ! -path '*/pod-init/*'); do
    for pid in $(cat "$procs"); do
      case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in */podvisor*) echo "$pid:$procs" ;; esac
    done
  done
}
scenario_monitors_outside_pods() {
  n=monitors-outside-pods errs=""
  seen=$(podvisor_in_pods)
  [ -n "$seen" ] && sleep 3
  for p in $(podvisor_in_pods); do
    case " $(echo $seen) " in
      *" $p "*) errs="$errs pid ${p%%:*} ($(readlink "/proc/${p%%:*}/exe")) in $(echo "${p#*:}" | sed "s|^$CG/||") for 3 s;" ;;
    esac
  done
  dcg=$(sed -n 's/^0:://p' "/proc/$daemon/cgroup")
  case "$dcg" in "/$PARENT"/*) errs="$errs the daemon is in $dcg;" ;; esac
  report $n
}

# shareProcessNamespace on pure v2: PID 1 of the pod is podvisor's init, seen by a container,
# living in the leaf <pod cgroup>/pod-init (v2 allows processes only in leaves).
peer_sees_init() { podvisor logs share-pid -c peer 2>/dev/null | grep -q '^podvisor shim pod-init'; }
scenario_share_pid() {
  n=share-pid errs=""
  if ! wait_until 60 peer_sees_init; then
    fail $n "PID 1 seen by the peer container is not the pod init: $(podvisor logs share-pid -c peer 2>&1 | tail -n 1)"
    return
  fi
  uid=$(pod_uid $n)
  if podcg=$(pod_cgroup "$uid"); then
    init=$(first_pid "$podcg/pod-init")
    [ -n "$init" ] || errs="$errs no process in $podcg/pod-init;"
    [ -n "$init" ] && ! grep -q 'pod-init' "/proc/$init/cmdline" 2>/dev/null &&
      errs="$errs $podcg/pod-init holds $init, not the pod init;"
  else
    errs="$errs no pod cgroup pod$uid;"
  fi
  report $n
}

scenario_removed() { # after every scenario manifest is deleted
  n=pod-cgroup-removed errs=""
  # every process of the scenarios' pods (pod cgroups with their containers' and pod-init)
  _pids=""
  for u in $scenario_uids; do
    _cg=$(pod_cgroup "$u") || continue
    _pids="$_pids $(find "$_cg" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ')"
  done
  for f in "$MANIFESTS"/*.yaml; do rm -f "$f"; done
  for p in $scenario_pods; do
    if ! wait_until 60 pod_gone "$p"; then errs="$errs pod $p still listed after 60 s;"; fi
  done
  for u in $scenario_uids; do
    if pod_cgroup "$u" >/dev/null; then errs="$errs $(pod_cgroup "$u") left behind;"; fi
  done
  left=$(leftover_cgroups | tr '\n' ' ')
  [ -z "$left" ] || errs="$errs leftover cgroups: $left;"
  [ -n "$_pids" ] || errs="$errs no process found in the pods before their removal;"
  _alive=""
  for _p in $_pids; do [ -d "/proc/$_p" ] && _alive="$_alive $_p:$(tr '\0' ' ' < "/proc/$_p/cmdline" 2>/dev/null)"; done
  [ -z "$_alive" ] || errs="$errs processes of removed pods still running:$_alive;"
  wait_until 30 no_monitors || errs="$errs podvisor processes left: $(leftover_monitors | tr '\n' ' ');"
  report $n
}
no_monitors() { [ -z "$(leftover_monitors)" ]; }

cycle_pod() { # NAME INDEX: pods alternate between the three QoS classes
  case $(($2 % 3)) in
    0) _res="resources: {limits: {cpu: 500m, memory: 32Mi}}" ;;
    1) _res="resources: {requests: {cpu: 20m, memory: 8Mi}}" ;;
    *) _res="resources: {}" ;;
  esac
  cat > "$MANIFESTS/.$1.tmp" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'trap "exit 0" TERM; sleep 1000 & wait']
    $_res
EOF
  mv "$MANIFESTS/.$1.tmp" "$MANIFESTS/$1.yaml"
}
# overlay mounts of container root filesystems still mounted
leftover_mounts() { grep " overlay " /proc/mounts | cut -d' ' -f2; }
# podvisor processes other than the daemon, its spawner and the spawner's spare monitor
# (monitors, sandbox holders)
leftover_monitors() {
  for _e in /proc/[0-9]*/exe; do
    _pid=${_e#/proc/}
    _pid=${_pid%/exe}
    [ "$_pid" = "$daemon" ] && continue
    case "$(readlink "$_e" 2>/dev/null)" in */podvisor) ;; *) continue ;; esac
    _cmd=$(tr '\0' ' ' < "/proc/$_pid/cmdline" 2>/dev/null)
    # The daemon's spawner (runtime::spawner) lives as long as the daemon.
    _ppid=$(sed 's/.*) [A-Z] \([0-9]*\) .*/\1/' "/proc/$_pid/stat" 2>/dev/null)
    case "$_cmd" in *" shim spawner "*) [ "$_ppid" = "$daemon" ] && continue ;; esac
    # So does the spare monitor that spawner keeps (runtime::spawner::spare_monitor).
    case "$_cmd" in *" shim spare-monitor "*)
      _sp_cmd=$(tr '\0' ' ' < "/proc/$_ppid/cmdline" 2>/dev/null)
      _sp_ppid=$(sed 's/.*) [A-Z] \([0-9]*\) .*/\1/' "/proc/$_ppid/stat" 2>/dev/null)
      case "$_sp_cmd" in *" shim spawner "*) [ "$_sp_ppid" = "$daemon" ] && continue ;; esac ;;
    esac
    echo "$_pid:$_cmd"
  done
}

# Running containers, counted from the cgroup tree (cheaper to poll than the daemon)
count_running() {
  _n=0
  for _p in "$CG/$PARENT"/pod*/*/cgroup.procs "$CG/$PARENT"/*/pod*/*/cgroup.procs; do
    # cgroup files report size 0: read a line instead of testing -s
    read -r _pid 2>/dev/null < "$_p" && _n=$((_n + 1))
  done
  echo $_n
}
all_running() { [ "$(count_running)" -ge "$CYCLE_PODS" ]; }
no_leftovers() { [ -z "$(leftover_cgroups)" ]; }
none_listed() { ! podvisor pods 2>/dev/null | grep -q '^cycle-'; }
scenario_cycles() {
  n=cycles-50 errs=""
  t=$(now)
  r=1
  while [ $r -le $CYCLE_ROUNDS ]; do
    i=1
    t_round=$(now)
    while [ $i -le $CYCLE_PODS ]; do cycle_pod "cycle-$r-$i" $i; i=$((i + 1)); done
    if ! wait_until 90 all_running; then
      errs="round $r: $(count_running) of $CYCLE_PODS pods Running after 90 s;"
      break
    fi
    t_up=$(now)
    rm -f "$MANIFESTS"/cycle-*.yaml
    if ! wait_until 90 no_leftovers; then
      errs="round $r: cgroups left 90 s after deletion: $(leftover_cgroups | tr '\n' ' ');"
      break
    fi
    if ! wait_until 30 none_listed; then
      errs="round $r: pods still listed 30 s after their cgroups went;"
      break
    fi
    say "INFO cycles round $r: $CYCLE_PODS pods up in $((t_up - t_round)) s, gone in $(($(now) - t_up)) s"
    r=$((r + 1))
  done
  if [ -z "$errs" ]; then
    _m=$(leftover_mounts | tr '\n' ' ')
    [ -z "$_m" ] || errs="$errs overlay mounts left: $_m;"
    _p=$(leftover_monitors | tr '\n' ' ')
    [ -z "$_p" ] || errs="$errs podvisor processes left: $_p;"
    say "INFO cycles: $((CYCLE_ROUNDS * CYCLE_PODS)) pods created and deleted in $(($(now) - t)) s"
  fi
  report $n
}

# Memory pressure (issue 14): a second daemon (own root, manifests, socket, cgroup parent)
# with evictionHard memory.available at MP_THRESHOLD and evictionMinimumReclaim MP_RECLAIM
# runs four static pods, each holding memory in a Memory emptyDir (tmpfs, charged to the pod
# and freed when the evicted pod's sandbox goes): a critical BestEffort pod
# (system-node-critical), a Guaranteed pod under its request, a Burstable pod over its request
# and a BestEffort pod, further above its request (0) than the Burstable pod is above its own.
# Then this script fills a tmpfs outside any pod, 4 MiB at a time, until the node's
# memory.available (MemFree + the root memory.stat inactive_file, as the eviction manager
# computes it on cgroup v2) is below the threshold. Expected, as the kubelet ranks pods: the
# BestEffort pod is evicted at once; the minimum reclaim is not reached with its memory back,
# so at the next pass (one housekeeping interval later) the Burstable pod; then nobody: a
# second push below the threshold evicts neither the Guaranteed pod nor the critical one. Once
# the fill is gone, MemoryPressure clears after evictionPressureTransitionPeriod (15 s) and
# both evicted static pods start again. The reaction time (the start of the 4 MiB write that
# crossed the threshold -> the BestEffort pod's cgroup has no process) is measured here, with
# the guest's clock, and printed as an INFO line.
MP_THRESHOLD=200 # MiB
MP_RECLAIM=128   # MiB
MP_FILL=/mnt/pv-mem-fill
mp_avail() { # memory.available in MiB, with shell builtins only (no fork: cheap to poll)
  _free=0 _inact=0
  while read -r _k _v _u; do
    case $_k in MemFree:) _free=$_v; break ;; esac
  done < /proc/meminfo
  while read -r _k _v; do
    case $_k in inactive_file) _inact=$_v; break ;; esac
  done < "$CG/memory.stat"
  echo $(( (_free * 1024 + _inact) / 1048576 ))
}
mp_pods() { podvisor pods "$@" --api-socket "$msock" 2>/dev/null; }
mp_field() { mp_pods "$1" -o json | field "$2"; }
# a field of the pod's status itself, at the indentation of "phase" (its conditions have
# reasons and messages too)
mp_sfield() {
  mp_pods "$1" -o json | awk -v k="\"$2\":" '
    { line[NR] = $0 }
    /^ *"phase":/ { ind = index($0, "\"") }
    END {
      for (i = 1; i <= NR; i++) {
        l = line[i]
        if (ind && index(l, "\"") == ind && substr(l, ind, length(k)) == k) {
          sub(/^[^:]*: "/, "", l); sub(/",?$/, "", l); print l; exit
        }
      }
    }'
}
mp_running() { [ "$(mp_sfield "$1" phase)" = Running ]; }
mp_evicted() { [ "$(mp_sfield "$1" phase)" = Failed ] && [ "$(mp_sfield "$1" reason)" = Evicted ]; }
mp_podcg() { # the pod cgroup of pod $1 of the memory-pressure daemon
  _u=$(mp_field "$1" uid)
  [ -n "$_u" ] || return 1
  for _d in "$CG/$mparent/pod$_u" "$CG/$mparent/burstable/pod$_u" "$CG/$mparent/besteffort/pod$_u"; do
    [ -d "$_d" ] && { echo "$_d"; return 0; }
  done
  return 1
}
mp_holding() { # POD MIB: its pod cgroup charges at least MIB
  _cg=$(mp_podcg "$1") || return 1
  read -r _cur < "$_cg/memory.current" || return 1
  [ $((_cur / 1048576)) -ge "$2" ]
}
mp_populated() { # CGROUP: 0 once no process is left in it (or it is gone)
  [ -f "$1/cgroup.events" ] || { echo 0; return; }
  while read -r _k _v; do
    case $_k in populated) echo "$_v"; return ;; esac
  done < "$1/cgroup.events"
  echo 0
}
mp_condition() { # TYPE: the node condition's status
  podvisor node --api-socket "$msock" 2>/dev/null | awk -v t="$1" '$1 == t { print $2; exit }'
}
mp_pressure() { [ "$(mp_condition MemoryPressure)" = "$1" ]; }
mp_fill_below() { # fills until memory.available < threshold; sets mp_cross_start, mp_cross_ms
  _i=$(ls "$MP_FILL" | wc -l)
  _end=$(($(now) + 120))
  while [ "$(mp_avail)" -ge "$MP_THRESHOLD" ]; do
    [ "$(now)" -ge "$_end" ] && return 1
    mp_cross_start=$(ms)
    dd if=/dev/zero of="$MP_FILL/f$_i" bs=1M count=4 2>/dev/null || return 1
    mp_cross_ms=$(($(ms) - mp_cross_start))
    _i=$((_i + 1))
  done
  return 0
}
mp_pod() { # NAME MIB PRIORITY-CLASS-LINE RESOURCES
  cat > "$mman/.$1.tmp" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  terminationGracePeriodSeconds: 1
  $3
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'dd if=/dev/zero of=/hold/data bs=1M count=$2 2>/dev/null; trap "exit 0" TERM; sleep 100000 & wait']
    volumeMounts: [{name: hold, mountPath: /hold}]
    $4
  volumes:
  - name: hold
    emptyDir: {medium: Memory, sizeLimit: $(($2 + 16))Mi}
EOF
  mv "$mman/.$1.tmp" "$mman/$1.yaml"
}
scenario_memory_pressure() {
  n=memory-pressure errs=""
  mroot=/var/lib/pv-mem mman=/etc/pv-mem msock=/run/pv-mem/api.sock mparent=pvmem
  mkdir -p "$mroot" "$mman" "$MP_FILL"
  mount -t tmpfs -o size=900m tmpfs "$MP_FILL"
  say "INFO memory-pressure: /proc/pressure/memory: $(head -n1 /proc/pressure/memory 2>&1)"
  podvisor --root-dir "$mroot" image import /vm/images/busybox.tar --ref docker.io/library/busybox:1.35 >/tmp/pv-mem-import.log 2>&1 ||
    errs="image import: $(tail -n 2 /tmp/pv-mem-import.log | tr '\n' ' ');"
  cat > /tmp/pv-mem-config.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard: {memory.available: ${MP_THRESHOLD}Mi}
evictionMinimumReclaim: {memory.available: ${MP_RECLAIM}Mi}
evictionPressureTransitionPeriod: 15s
EOF
  mp_pod mem-critical 32 "priorityClassName: system-node-critical" "resources: {}"
  mp_pod mem-guaranteed 24 "" "resources: {limits: {cpu: 100m, memory: 64Mi}}"
  mp_pod mem-burstable 64 "" "resources: {requests: {memory: 16Mi}}"
  mp_pod mem-besteffort 96 "" "resources: {}"
  RUST_LOG=info podvisor --root-dir "$mroot" --runtime-dir /run/pv-mem/state --log-dir /var/log/pv-mem \
    --cgroup-parent "$mparent" run --config /tmp/pv-mem-config.yaml \
    --pod-manifest-path "$mman" --api-socket "$msock" --cni-conf-dir '' >/var/log/pv-mem.log 2>&1 &
  md=$!
  for p in critical:32 guaranteed:24 burstable:64 besteffort:96; do
    [ -z "$errs" ] || break
    wait_until 90 mp_holding "mem-${p%%:*}" "${p#*:}" ||
      errs="$errs mem-${p%%:*} not holding ${p#*:} MiB after 90 s (phase $(mp_sfield "mem-${p%%:*}" phase));"
  done
  be_cg=$(mp_podcg mem-besteffort)
  a0=$(mp_avail)
  [ -z "$errs" ] && [ "$a0" -lt $((MP_THRESHOLD + 40)) ] &&
    errs="memory.available is $a0 MiB with the pods up: too close to the ${MP_THRESHOLD} MiB threshold for this test (PODVISOR_VM_MEM?);"
  if [ -z "$errs" ]; then
    say "INFO memory-pressure: memory.available $a0 MiB with the 4 pods up; filling to below ${MP_THRESHOLD} MiB"
    grep -a 'memory notifier' /var/log/pv-mem.log | head -n 2 | sed 's/^/PODVISOR-VM: INFO memory-pressure: daemon: /'
    if ! mp_fill_below; then
      errs="could not bring memory.available below ${MP_THRESHOLD} MiB (at $(mp_avail) MiB);"
    else
      # the crossing write started at $mp_cross_start: wait for the BestEffort pod's cgroup to empty
      _end=$(($(now) + 30))
      while [ "$(mp_populated "$be_cg")" != 0 ] && [ "$(now)" -lt "$_end" ]; do :; done
      t_empty=$(ms)
      if [ "$(mp_populated "$be_cg")" != 0 ]; then
        errs="the BestEffort pod's cgroup still has processes 30 s after memory.available crossed the threshold;"
      else
        say "INFO memory-pressure: reaction: threshold crossed -> BestEffort pod's cgroup empty: $((t_empty - mp_cross_start)) ms (from the start of the 4 MiB write that crossed it, which took $mp_cross_ms ms; memory.available now $(mp_avail) MiB; PSI $(head -n1 /proc/pressure/memory 2>&1))"
      fi
    fi
  fi
  if [ -z "$errs" ]; then
    wait_until 10 mp_evicted mem-besteffort ||
      errs="$errs mem-besteffort not Failed/Evicted (phase $(mp_sfield mem-besteffort phase));"
    mp_running mem-burstable || errs="$errs mem-burstable was evicted with (or before) the BestEffort pod;"
    msg=$(mp_sfield mem-besteffort message)
    case "$msg" in
      "The node was low on resource: memory. Threshold quantity: ${MP_THRESHOLD}Mi, available: "*"Container main was using "*", request is 0, has larger consumption of memory. ") ;;
      *) errs="$errs mem-besteffort message \"$msg\";" ;;
    esac
    mp_pods mem-besteffort -o json | grep -q '"reason": "TerminationByKubelet"' ||
      errs="$errs mem-besteffort has no DisruptionTarget condition (reason TerminationByKubelet);"
    mp_pressure True || errs="$errs MemoryPressure is $(mp_condition MemoryPressure) after the eviction (want True);"
    # the minimum reclaim is not reached with the BestEffort pod's memory back: the next pass
    # (one housekeeping interval later) evicts the Burstable pod
    t_first=$(now)
    wait_until 30 mp_evicted mem-burstable ||
      errs="$errs mem-burstable not evicted within 30 s (memory.available $(mp_avail) MiB, threshold + minimum reclaim $((MP_THRESHOLD + MP_RECLAIM)) MiB);"
    say "INFO memory-pressure: the Burstable pod evicted $(($(now) - t_first)) s after the BestEffort one; memory.available $(mp_avail) MiB"
  fi
  if [ -z "$errs" ]; then
    # pressure again: only the Guaranteed pod under its request and the critical pod are left
    mp_fill_below || errs="$errs could not push memory.available below the threshold again;"
    sleep 12 # more than one housekeeping interval
    for p in mem-guaranteed mem-critical; do
      mp_running $p || errs="$errs $p is $(mp_sfield $p phase)/$(mp_sfield $p reason) under pressure (never evicted);"
    done
    grep -q 'evicting pod default/mem-\(guaranteed\|critical\)' /var/log/pv-mem.log &&
      errs="$errs the daemon evicted a protected pod;"
    rm -f "$MP_FILL"/*
    say "INFO memory-pressure: fill released; memory.available $(mp_avail) MiB"
    t_rel=$(now)
    wait_until 40 mp_pressure False || errs="$errs MemoryPressure still $(mp_condition MemoryPressure) 40 s after the fill went;"
    say "INFO memory-pressure: MemoryPressure False $(($(now) - t_rel)) s after the release (evictionPressureTransitionPeriod 15 s)"
    for p in mem-besteffort mem-burstable; do
      wait_until 60 mp_running $p ||
        errs="$errs evicted static pod $p not Running again 60 s after the pressure cleared (phase $(mp_sfield $p phase));"
    done
    evs=$(podvisor events --api-socket "$msock" 2>/dev/null)
    for want in Evicted EvictionThresholdMet NodeHasInsufficientMemory NodeHasSufficientMemory EvictionRecovered; do
      echo "$evs" | grep -q "$want" || errs="$errs no $want event;"
    done
  fi
  [ -n "$errs" ] && tail -n 30 /var/log/pv-mem.log | sed 's/^/PODVISOR-VM: INFO memory-pressure: daemon: /'
  rm -f "$MP_FILL"/* "$mman"/*.yaml
  _end=$(($(now) + 60))
  while [ -n "$(find "$CG/$mparent" -mindepth 1 -name 'pod*' 2>/dev/null)" ] && [ "$(now)" -lt "$_end" ]; do sleep 0.5; done
  kill "$md" 2>/dev/null
  wait "$md" 2>/dev/null
  umount "$MP_FILL"
  report $n
}

# --- pod network (issue 16): a daemon of its own on a fresh node's default CNI network -------
# /etc/cni/net.d is empty: podvisor writes its default network (bridge podvisor0, host-local on
# 10.86.0.0/16, portmap, firewall, bandwidth) and pods join it, on iptables-nft beside an
# admin's native nftables table. Checked from the VM (the host): the pod IP, the hostPort on
# 127.0.0.1 and on the bridge address, pod to pod, pod to host, /etc/hosts; after the
# manifests go, no veth, IP allocation, attachment record or per-pod rule is left and the
# admin's table is intact.
net_pods() { podvisor --root-dir /var/lib/pv-net --runtime-dir /run/pv-net/state pods "$@" --api-socket /run/pv-net/api.sock 2>/dev/null; }
net_exec() { podvisor --root-dir /var/lib/pv-net --runtime-dir /run/pv-net/state exec --api-socket /run/pv-net/api.sock "$@" 2>&1; }
net_ip() { net_pods "$1" -o json | field podIP; }
net_has_ip() { case "$(net_ip "$1")" in 10.86.*) [ "$(net_pods "$1" -o json | field phase)" = Running ] ;; *) return 1 ;; esac; }
# HOST PORT: the body's last line of a GET / (busybox nc: the static busybox's wget crashes in
# this initramfs, outside a container)
net_get() { printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 "$1" "$2" 2>/dev/null | tail -n 1; }
net_serves() { [ "$(net_get "$1" "$2")" = "$3" ]; }
# POD HOST PORT: the same from inside a pod
net_get_in() { net_exec "$1" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 $2 $3 | tail -n 1"; }
net_allocations() { ls /var/lib/pv-net/network/ipam/podvisor 2>/dev/null | grep -v -e '^lock$' -e '^last_reserved_ip'; }
net_rules() { { iptables-save; ip6tables-save; } 2>/dev/null | grep -e 'CNI-DN-' -e ' id: \\"' -e "$1/"; }
net_clean() { [ -z "$(ip link | grep veth)" ] && [ -z "$(net_allocations)" ] && [ -z "$(ls /var/lib/pv-net/network/attachments 2>/dev/null)" ]; }
scenario_pod_network() {
  n=pod-network errs="" ip=""
  nman=/etc/pv-net
  mkdir -p "$nman" /run/pv-net /etc/cni/net.d
  printf 'table inet admin_filter {\n  chain forward { type filter hook forward priority 0; policy accept; }\n}\n' > /tmp/admin.nft
  nft -f /tmp/admin.nft || errs="$errs nft refused the admin table;"
  cat > "$nman/web.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox:1.35
    command: [sh, -c, 'mkdir -p /www && echo "web $POD_IP" > /www/index.html && exec httpd -f -p 8080 -h /www']
    env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]
    ports: [{containerPort: 8080, hostPort: 18080}]
EOF
  cat > "$nman/client.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
EOF
  podvisor --root-dir /var/lib/pv-net image import /vm/images/busybox.tar \
    --ref docker.io/library/busybox:1.35 >/dev/null 2>&1 || errs="$errs image import failed;"
  nt0=$(ms)
  RUST_LOG=info podvisor --root-dir /var/lib/pv-net --runtime-dir /run/pv-net/state \
    --log-dir /var/log/pv-net --cgroup-parent pvnet run --pod-manifest-path "$nman" \
    --api-socket /run/pv-net/api.sock --hostname-override vm >/var/log/pv-net.log 2>&1 &
  nd=$!
  if ! wait_until 120 net_has_ip web-vm || ! wait_until 60 net_has_ip client-vm; then
    errs="$errs pods without a pod IP: web '$(net_ip web-vm)', client '$(net_ip client-vm)': $(grep -e WARN -e ERROR /var/log/pv-net.log | tail -n 3 | tr '\n' ' ');"
  else
    say "INFO pod-network: daemon start to two pods running with IPs: $(($(ms) - nt0)) ms"
    ip=$(net_ip web-vm)
    [ -f /etc/cni/net.d/87-podvisor-bridge.conflist ] || errs="$errs no default conflist written;"
    # (httpd may take a moment to listen under emulation)
    wait_until 30 net_serves "$ip" 8080 "web $ip" || {
      errs="$errs pod IP $ip not reachable: '$(net_get "$ip" 8080)';"
      { ping -c 2 -W 2 "$ip"; ip route; net_exec web-vm -- ip addr; net_exec web-vm -- netstat -ltn
      } 2>&1 | sed 's/^/PODVISOR-VM: INFO pod-network: /'
    }
    gw=$(ip -4 addr show podvisor0 | sed -n 's/.*inet \([0-9.]*\)\/.*/\1/p' | head -n1)
    for h in 127.0.0.1 "$gw"; do
      [ "$(net_get "$h" 18080)" = "web $ip" ] || errs="$errs hostPort via $h: '$(net_get "$h" 18080)';"
    done
    out=$(net_get_in client-vm "$ip" 8080)
    [ "$out" = "web $ip" ] || errs="$errs pod to pod: '$out';"
    mkdir -p /tmp/host-www && echo "from the host" > /tmp/host-www/index.html
    httpd -p "$gw:19090" -h /tmp/host-www
    out=$(net_get_in client-vm "$gw" 19090)
    [ "$out" = "from the host" ] || errs="$errs pod to host: '$out';"
    out=$(net_exec web-vm -- cat /etc/hosts)
    echo "$out" | grep -q "^$ip	web-vm\$" || errs="$errs /etc/hosts has no '$ip web-vm';"
    iptables-save 2>/dev/null | grep -q CNI-HOSTPORT-DNAT || errs="$errs no portmap rule in iptables-nft;"
  fi
  rm -f "$nman"/*.yaml
  wait_until 90 net_clean || errs="$errs left after the pods went: veths '$(ip link | grep veth | cut -d: -f2 | tr '\n' ' ')', allocations '$(net_allocations | tr '\n' ' ')';"
  left=$(net_rules "${ip:-none}")
  [ -z "$left" ] || errs="$errs per-pod rules left: $(echo "$left" | head -n 3 | tr '\n' ' ');"
  nft list table inet admin_filter >/dev/null 2>&1 || errs="$errs the admin's nftables table is gone;"
  kill "$nd" 2>/dev/null
  wait "$nd" 2>/dev/null
  [ -n "$errs" ] && tail -n 20 /var/log/pv-net.log | sed 's/^/PODVISOR-VM: INFO pod-network: daemon: /'
  report $n
}

# --- main ----------------------------------------------------------------------------------
t0=$(now)
busybox_image=/vm/images/busybox.tar
if grep -q 'podvisor_vm\.daemon=armhf' /proc/cmdline; then
  # The armhf boot: the armv7 podvisor (its loader and libraries in /lib, as on armhf) becomes
  # every podvisor command here, the daemon and its shims (/proc/self/exe) included, and the
  # pods run 32-bit ARM busybox.
  cp /vm/armhf/podvisor /usr/bin/podvisor
  busybox_image=/vm/images/busybox-armhf.tar
  PREFIX=armhf-
fi
# a tagged reference: the manifests use busybox:1.35, whose default pull policy IfNotPresent
# never reaches for a registry (the VM has no network; :latest would mean Always)
podvisor image import "$busybox_image" --ref docker.io/library/busybox:1.35 >/tmp/import.log 2>&1 ||
  say "INFO image import failed: $(tail -n 3 /tmp/import.log | tr '\n' ' ')"
podvisor image import /vm/images/multiarch.tar >/tmp/import.log 2>&1 ||
  say "INFO multiarch image import failed: $(tail -n 3 /tmp/import.log | tr '\n' ' ')"
# Pods without a pod network (loopback only) here: the pod-network scenario runs a daemon of
# its own with the default CNI network.
RUST_LOG=${RUST_LOG:-info} podvisor run --config /vm/kubelet-config.yaml \
  --pod-manifest-path "$MANIFESTS" --cni-conf-dir '' >"$DAEMON_LOG" 2>&1 &
daemon=$!
if ! wait_until 30 podvisor pods; then
  say "INFO the daemon did not answer within 30 s: $(tail -n 5 "$DAEMON_LOG" | tr '\n' ' ')"
fi
t1=$(ms)
podvisor pods >/dev/null 2>&1
say "INFO image imported and daemon up in $(($(now) - t0)) s; one podvisor pods call: $(($(ms) - t1)) ms"
if [ -n "$PREFIX" ]; then
  _d=$(file_arch "/proc/$daemon/exe")
  [ "$_d" = "32-bit ARM" ] || ARCH_ERR="the daemon (pid $daemon) is a $_d binary, not the armv7 podvisor"
  say "INFO armhf boot: a $_d podvisor daemon on a $(uname -m) $(uname -r) kernel"
fi

# podvisor_vm.only=a,b on the kernel command line (PODVISOR_VM_ONLY of run.sh) picks scenarios
# (the armhf boot's names carry the armhf- prefix)
only=$(sed -n 's/.*podvisor_vm\.only=\([^ ]*\).*/\1/p' /proc/cmdline)
want() {
  [ -z "$only" ] && return 0
  named "$1"
}
# scenarios that run only when named (run.sh boots a VM for each of them)
named() { case ",$only," in *",$PREFIX$1,"*) return 0 ;; *) return 1 ;; esac; }
scenario_pods=""
for p in qos-guaranteed qos-burstable qos-besteffort oom-killed oom-child pids-limit cpu-throttled refused-outofcpu refused-outofmemory device-filter privileged-device apparmor-default apparmor-localhost multiarch-image share-pid probe-ready crash-restart; do
  if want $p; then
    start_pod $p
    scenario_pods="$scenario_pods $p"
  fi
done

want qos-guaranteed && scenario_qos_guaranteed
want qos-burstable && scenario_qos_burstable
want qos-besteffort && scenario_qos_besteffort
want oom-killed && scenario_oom oom-killed
want oom-child && scenario_oom oom-child
want pids-limit && scenario_pids_limit
want cpu-throttled && scenario_cpu_throttled
want refused-outofcpu && scenario_refused refused-outofcpu OutOfcpu
want refused-outofmemory && scenario_refused refused-outofmemory OutOfmemory
want device-filter && scenario_device_filter
want privileged-device && scenario_privileged_device
want apparmor-default && scenario_apparmor_default
want apparmor-localhost && scenario_apparmor_localhost
want multiarch-image && scenario_multiarch_image
want share-pid && scenario_share_pid
want probe-ready && scenario_probe_ready
want crash-restart && scenario_crash_restart
want monitors-outside-pods && scenario_monitors_outside_pods

scenario_uids=""
for p in $scenario_pods; do scenario_uids="$scenario_uids $(pod_uid "$p")"; done
want pod-cgroup-removed && scenario_removed
want boot-to-pods && scenario_boot_to_pods
want cycles-50 && scenario_cycles
named pod-network && scenario_pod_network
named memory-pressure && scenario_memory_pressure
say "INFO scenarios took $(($(now) - t0)) s"
warnings=$(grep -c -e '^\[[^ ]* WARN' -e '^\[[^ ]* ERROR' "$DAEMON_LOG")
say "INFO daemon log: $warnings WARN/ERROR lines"
grep -e '^\[[^ ]* WARN' -e '^\[[^ ]* ERROR' "$DAEMON_LOG" | head -n 10 | sed 's/^/PODVISOR-VM: INFO daemon: /'

if [ "$failures" -gt 0 ]; then
  echo "---- podvisor pods -o wide ----"
  podvisor pods -o wide 2>&1
  echo "---- last 60 lines of the daemon log ----"
  tail -n 60 "$DAEMON_LOG"
  echo "----"
fi
kill "$daemon" 2>/dev/null
