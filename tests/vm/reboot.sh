#!/bin/sh
# Reboot and power-cut scenarios, run by /init inside the test VM (busybox sh) when the kernel
# command line names a phase (podvisor_vm.phase=...; tests/vm/run.sh boots the phases one
# after another on the same disk). The VM's root is a tmpfs, so /run (podvisor's runtime dir)
# is empty at every boot, as on a real node; podvisor's root dir, log dir and manifest
# directory are on a virtio ext4 disk (/dev/vda) that survives the VM.
#
#   setup    import the image, run six pods, stop the daemon (its containers keep running, as
#            under systemd), sync, power off: an orderly reboot follows.
#   cut-N    verify the previous boot, then churn (manifest edits, container kills or an image
#            import, in turn; podvisor_vm.churn=edits,kills,import sets the cycle) and cut the
#            power (sysrq b: no sync, no shutdown) at a moment that differs from cut to cut.
#   final    verify the last cut, stop the daemon, power off.
#
# A verification starts `podvisor check --dry-run` before the daemon (no inconsistent record
# or image may be left by the cut; interrupted writes may), starts the daemon, waits until
# every pod runs again, checks that no container is duplicated, that restart counts went up as
# the kubelet counts them (previous + 1; exactly that after the orderly reboot, whose lost
# containers show lastState 255/Unknown), that logs --previous works and the disk emptyDir
# kept its data while the memory one did not, then `podvisor check` with the daemon running.
# It prints one line: PODVISOR-VM: PASS|FAIL reboot-orderly, or power-cut-<N>.

CG=/sys/fs/cgroup
PARENT=podvisor
MANIFESTS=/etc/kubernetes/manifests
SRC=/vm/reboot
STATE=/disk/vmtest
DAEMON_LOG=/var/log/podvisor-daemon.log
NODE=podvisor-vm
# pod:app-containers (kubectl's RESTARTS sums the app containers)
PODS="web:1 counter:1 logger:1 withinit:1 hostnet:1 pair:2"
APP_CONTAINERS=7

say() { echo "PODVISOR-VM: $*"; }
now() { date +%s; }
ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
wait_until() { # SECONDS CMD...: CMD every 0.5 s until it succeeds; 1 on timeout
  _end=$(($(now) + $1))
  shift
  until "$@"; do
    [ "$(now)" -ge "$_end" ] && return 1
    sleep 0.5
  done
}
arg() { sed -n "s/.*podvisor_vm\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
phase=$(arg phase)
cuts=$(arg cuts)
# the churn before cut N: the ((N-1) mod count)th of this list (edits, kills, import)
churn=$(arg churn)
churn=${churn:-edits,kills,import}

# --- the disk ------------------------------------------------------------------------------
mkdir -p /disk
if ! mount -t ext4 /dev/vda /disk; then
  say "FAIL reboot-disk: cannot mount /dev/vda: $(dmesg | tail -n 3 | tr '\n' ' ')"
  exit 1
fi
mkdir -p /disk/lib /disk/log /disk/manifests "$STATE" /var/lib/podvisor /var/log/pods "$MANIFESTS"
mount --bind /disk/lib /var/lib/podvisor
mount --bind /disk/log /var/log/pods
mount --bind /disk/manifests "$MANIFESTS"

start_daemon() {
  RUST_LOG=${RUST_LOG:-info} podvisor run --config /vm/kubelet-config.yaml \
    --pod-manifest-path "$MANIFESTS" --cni-conf-dir '' >>"$DAEMON_LOG" 2>&1 &
  daemon=$!
}
stop_daemon() {
  kill "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
}

# --- pods ----------------------------------------------------------------------------------
table() { podvisor pods 2>/dev/null; }
# every pod of $PODS Running with all containers ready, in the table on stdin
table_all_running() {
  awk -v pods="$PODS" -v node="$NODE" '
    BEGIN { n = split(pods, p, " "); for (i = 1; i <= n; i++) { split(p[i], a, ":"); want[a[1] "-" node] = 1 } }
    ($1 in want) { split($2, r, "/"); if (r[1] == r[2] && r[2] > 0 && $3 == "Running") ok[$1] = 1 }
    END { for (w in want) if (!(w in ok)) exit 1 }'
}
all_running() { table | table_all_running; }
# "name restarts uid" per pod, from one `pods -o json` and one table
pod_state() {
  _t=$(table)
  podvisor pods -o json 2>/dev/null | awk -v node="$NODE" '
    /"name": ".*-'"$NODE"'"/ { n = $2; gsub(/[",]/, "", n) }
    /"uid":/ && n != "" { u = $2; gsub(/[",]/, "", u); print n, u; n = "" }' |
    while read -r _n _u; do
      echo "$_n $(echo "$_t" | awk -v n="$_n" '$1 == n { print $4 }') $_u"
    done
}
# running containers, from the cgroup tree (a duplicate would show as an extra one)
count_running() {
  _n=0
  for _p in "$CG/$PARENT"/pod*/*/cgroup.procs "$CG/$PARENT"/*/pod*/*/cgroup.procs; do
    read -r _pid 2>/dev/null < "$_p" && _n=$((_n + 1))
  done
  echo $_n
}
count_monitors() {
  _n=0
  for _c in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' < "$_c"; } 2>/dev/null | grep -q '^[^ ]*podvisor shim run ' && _n=$((_n + 1))
  done
  echo $_n
}
settled() {
  [ "$(count_running)" = "$APP_CONTAINERS" ] && [ "$(count_monitors)" = "$APP_CONTAINERS" ]
}
save_state() { # what the next boot compares with
  pod_state > "$STATE/before"
  echo "$1" > "$STATE/churn"
  sync
}

# --- verification of the previous boot -----------------------------------------------------
verify() { # NAME ORDERLY(0|1)
  _name=$1 errs=""
  out=$(podvisor check --dry-run 2>&1)
  echo "$out" | grep '^INCONSISTENT' | head -n 5 | while read -r l; do say "INFO check: $l"; done
  echo "$out" | grep -q '^INCONSISTENT' && errs="$errs podvisor check --dry-run found inconsistencies left by the cut;"
  _intr=$(echo "$out" | grep -c '^interrupted')
  _t0=$(ms)
  start_daemon
  if wait_until 240 all_running; then
    say "INFO $_name: daemon start -> all 6 pods running: $(($(ms) - _t0)) ms; $_intr interrupted write(s) found before the start"
  else
    errs="$errs not every pod running 240 s after the daemon started: $(table | tr '\n' ';');"
  fi
  wait_until 60 settled ||
    errs="$errs $(count_running) running containers and $(count_monitors) monitors (want $APP_CONTAINERS each);"
  after=$(pod_state)
  while read -r _n _r _u; do
    _p=${_n%-"$NODE"}
    _want=$(echo "$PODS" | tr ' ' '\n' | sed -n "s/^$_p://p")
    _now=$(echo "$after" | awk -v n="$_n" '$1 == n { print $2, $3 }')
    _nr=${_now% *}
    _nu=${_now#* }
    [ -n "$_now" ] || { errs="$errs pod $_n missing;"; continue; }
    [ "$_nu" = "$_u" ] || continue # replaced by a manifest edit: counts start again
    if [ "$2" = 1 ]; then
      [ "$_nr" = $((_r + _want)) ] || errs="$errs $_n RESTARTS $_nr (want $_r + $_want);"
    else
      [ "$_nr" -gt "$_r" ] 2>/dev/null || errs="$errs $_n RESTARTS $_nr (want > $_r);"
    fi
  done < "$STATE/before"
  if [ "$2" = 1 ]; then
    podvisor pods counter -o json 2>/dev/null | grep -q '"reason": "Unknown"' ||
      errs="$errs no lastState reason Unknown for a container lost with the node;"
    podvisor logs logger --previous 2>/dev/null | grep -q 'line=' ||
      errs="$errs logs --previous of logger is empty;"
  fi
  _c=$(podvisor logs counter 2>/dev/null | grep -o 'starts=[0-9]* mem=[a-z]*' | tail -n 1)
  case "$_c" in
    starts=1\ *) errs="$errs counter's disk emptyDir lost its data ($_c);" ;;
    *mem=none) ;;
    *) errs="$errs counter's memory emptyDir survived the reboot ($_c);" ;;
  esac
  out=$(podvisor check 2>&1) || errs="$errs podvisor check: $(echo "$out" | tail -n 3 | tr '\n' ' ');"
  # one desired-pod record per pod: none of a replaced generation is left
  echo "$out" | tail -n 1 | grep -q ' 6 desired pod(s)' ||
    errs="$errs desired-pod records: $(echo "$out" | tail -n 1);"
  say "INFO $_name: $(echo "$out" | tail -n 1)"
  if [ -z "$errs" ]; then
    say "PASS $_name"
    return 0
  fi
  say "FAIL $_name:$errs"
  echo "---- podvisor pods -o wide ----"
  podvisor pods -o wide 2>&1
  echo "---- last 40 lines of the daemon log ----"
  tail -n 40 "$DAEMON_LOG"
  echo "----"
  return 1
}

# --- churn and power cut -------------------------------------------------------------------
cut_power() { # WHAT DELAY-MS: announces the cut (the serial line drains meanwhile), cuts
  say "INFO cutting the power during $1"
  usleep $(($2 * 1000))
  echo b > /proc/sysrq-trigger
  sleep 10
  say "FAIL power-cut: sysrq b did not reset the VM"
}
edit() { # POD GENERATION: rewrite a manifest as editors do (temp file, rename)
  sed "s/value: \"[0-9.]*\"/value: \"$2\"/" "$SRC/$1.yaml" > "$MANIFESTS/.$1.yaml.tmp"
  mv "$MANIFESTS/.$1.yaml.tmp" "$MANIFESTS/$1.yaml"
}
init_pid_of() { # POD: the pid of the first container process of the pod's cgroup
  _uid=$(podvisor pods "$1" -o json 2>/dev/null | sed -n 's/^ *"uid": "\([^"]*\)".*/\1/p' | head -n 1)
  for _p in "$CG/$PARENT/pod$_uid"/*/cgroup.procs "$CG/$PARENT"/*/"pod$_uid"/*/cgroup.procs; do
    read -r _pid 2>/dev/null < "$_p" && { echo "$_pid"; return; }
  done
}
churn_and_cut() { # CUT-NUMBER
  _delay=$((200 + ($1 * 733) % 2400))
  _kinds=$(echo "$churn" | tr ',' ' ')
  set -- "$1" $_kinds
  _n=$1
  shift
  _i=$(((_n - 1) % $#))
  shift "$_i"
  _kind=$1
  set -- "$_n"
  case "$_kind" in
    edits)
      save_state "manifest edits"
      edit logger "$1.1"
      edit pair "$1.1"
      sleep 1
      edit logger "$1.2"
      cut_power "manifest edits (${_delay} ms after the last edit)" "$_delay"
      ;;
    kills)
      save_state "container kills"
      for p in web counter hostnet; do kill -9 "$(init_pid_of $p)" 2>/dev/null; done
      usleep $((_delay * 1000))
      kill -9 "$(init_pid_of logger)" 2>/dev/null
      cut_power "container kills (${_delay} ms after the first kills, 100 ms after the last)" 100
      ;;
    import)
      # At a point of the import that moves from cut to cut: 15..90 % of the time a whole
      # import took in the setup phase (spooling, blob commits, layer unpacking, records).
      _full=$(cat "$STATE/import-ms" 2>/dev/null || echo 3000)
      _delay=$((_full * (15 + ($1 * 37) % 76) / 100))
      save_state "an image import"
      podvisor image import /vm/images/churn.tar --ref "example.com/churn:$1" >/dev/null 2>&1 &
      cut_power "an image import (${_delay} ms into it; a whole import took ${_full} ms)" "$_delay"
      ;;
    *)
      say "FAIL power-cut-$1: unknown churn $_kind (podvisor_vm.churn=$churn)"
      ;;
  esac
}

# --- phases --------------------------------------------------------------------------------
t0=$(now)
case "$phase" in
  setup)
    podvisor image import /vm/images/busybox.tar --ref docker.io/library/busybox:1.35 >/tmp/import.log 2>&1 ||
      say "INFO image import failed: $(tail -n 3 /tmp/import.log | tr '\n' ' ')"
    # How long importing the churn image takes here, for the cut during an import; then it is
    # removed again, so that import writes its content anew.
    _t=$(ms)
    podvisor image import /vm/images/churn.tar --ref example.com/churn:probe >/dev/null 2>&1
    echo $(($(ms) - _t)) > "$STATE/import-ms"
    podvisor image rm example.com/churn:probe >/dev/null 2>&1
    say "INFO importing the churn image takes $(cat "$STATE/import-ms") ms"
    for f in "$SRC"/*.yaml; do cp "$f" "$MANIFESTS/"; done
    start_daemon
    if ! wait_until 240 all_running; then
      say "FAIL reboot-setup: pods not running after 240 s: $(table | tr '\n' ';')"
    elif ! wait_until 60 settled; then
      say "FAIL reboot-setup: $(count_running) running containers and $(count_monitors) monitors (want $APP_CONTAINERS each)"
    else
      say "PASS reboot-setup"
    fi
    save_state "an orderly reboot"
    stop_daemon
    say "INFO setup took $(($(now) - t0)) s; orderly reboot: daemon stopped, containers running, sync, power off"
    ;;
  cut-*)
    n=${phase#cut-}
    if [ "$n" = 1 ]; then verify reboot-orderly 1; else verify "power-cut-$((n - 1))" 0; fi
    say "INFO verification took $(($(now) - t0)) s"
    churn_and_cut "$n"
    ;;
  final)
    verify "power-cut-$cuts" 0
    stop_daemon
    ;;
esac
if grep -q -e '^\[[^ ]* ERROR' "$DAEMON_LOG" 2>/dev/null; then
  grep -e '^\[[^ ]* ERROR' "$DAEMON_LOG" | head -n 5 | sed 's/^/PODVISOR-VM: INFO daemon: /'
fi
sync
