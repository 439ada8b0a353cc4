#!/bin/sh
# Runs inside the Debian 12 + systemd VM of tests/vm/install.sh, as a oneshot unit after
# multi-user.target: the package's life on a real systemd. One line per step on the console:
#   PODVISOR-VM: PASS <step>   or   PODVISOR-VM: FAIL <step>: <why>
# then the VM powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
say() { echo "PODVISOR-VM: $*"; }
pass() { say "PASS $1"; }
fail() { say "FAIL $1: $2"; }
report() { if [ -z "$errs" ]; then pass "$1"; else fail "$1" "$errs"; fi; }
now() { date +%s; }
wait_until() { # SECONDS CMD...
  _end=$(($(now) + $1))
  shift
  until "$@"; do
    [ "$(now)" -ge "$_end" ] && return 1
    sleep 0.5
  done
}
prop() { systemctl show -p "$1" --value podvisor.service 2>/dev/null; }
running_pods() { podvisor pods 2>/dev/null | grep -c ' Running '; }
two_running() { [ "$(running_pods)" -ge 2 ]; }
# "cgroup pid" of every container, sorted: what must not change across restarts
# (the cgroupfs layout, or the systemd driver's slices and scopes)
container_pids() {
  for p in /sys/fs/cgroup/podvisor/pod*/*/cgroup.procs /sys/fs/cgroup/podvisor/*/pod*/*/cgroup.procs \
    /sys/fs/cgroup/podvisor.slice/*pod*.slice/*.scope/cgroup.procs \
    /sys/fs/cgroup/podvisor.slice/*.slice/*pod*.slice/*.scope/cgroup.procs; do
    [ -f "$p" ] && echo "${p%/cgroup.procs} $(head -n1 "$p")"
  done | sort
}
manifest() { # NAME RESOURCES: a static pod of one container sleeping until TERM
  cat > "/etc/kubernetes/manifests/$1.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: multiarch:1.0
    resources: $2
    command: [sh, -c, 'trap "exit 0" TERM; sleep 100000 & wait']
EOF
}
ms() { echo $(($(date +%s%N) / 1000000)); }
# Start latency of a one-container pod: ms from its manifest written to `podvisor pods` showing
# it Running (polled every 50 ms), 3 pods one after the other; then they are removed. Prints
# the three numbers, "timeout" for one not Running within 90 s.
start_latency() { # PREFIX
  for i in 1 2 3; do
    _t0=$(ms)
    manifest "$1$i" '{limits: {cpu: 100m, memory: 32Mi}}'
    _end=$(($(now) + 90))
    until podvisor pods 2>/dev/null | grep -q "^$1$i-.* Running "; do
      [ "$(now)" -ge "$_end" ] && { printf 'timeout '; continue 2; }
      sleep 0.05
    done
    printf '%s ' "$(($(ms) - _t0))"
  done
  rm -f /etc/kubernetes/manifests/"$1"?.yaml
}
# ms of an exec into POD (the multiarch image's busybox has sh, cat, echo and sleep)
exec_ms() { _t0=$(ms); podvisor exec "$1" -- cat /etc/podvisor-platform >/dev/null 2>&1 || { echo failed; return; }; echo $(($(ms) - _t0)); }
# The journal's count of connections to systemd's private socket (systemd logs them at debug)
private_conns() { journalctl -b --no-pager -o cat 2>/dev/null | grep -c 'Accepted new private connection'; }
ready_again() { [ "$(prop ActiveState)" = active ] && [ "$(prop MainPID)" != "$1" ] && [ "$(prop MainPID)" != 0 ]; }

say "BEGIN $(systemctl --version | head -n1), kernel $(uname -r), cgroup $(stat -fc %T /sys/fs/cgroup)"

# A step that hangs (a command with no timeout of its own: dpkg waiting for the unit's start,
# systemctl) is reported with what the system was doing, before the host's qemu timeout kills
# the VM and leaves only "MISSING": the processes and where each is blocked in the kernel,
# podvisor's threads' kernel stacks, the unit, systemd's jobs and the journal. The deadline is
# the host's (podvisor_vm.hang= on the kernel command line, in seconds since boot).
hang_report() { # SECONDS-SINCE-BOOT
  _up=$(cut -d. -f1 /proc/uptime)
  [ "$1" -gt "$_up" ] && sleep $(($1 - _up))
  say "FAIL hang: no DONE $1 s after boot; what the system was doing follows"
  say "INFO kernel| $(dmesg 2>&1 | grep -i -e 'crng' -e 'random' -e 'hung task' -e 'blocked for' | tr '\n' '|')"
  ps -eo pid,ppid,stat,wchan:28,etimes,args 2>&1 | while IFS= read -r l; do say "INFO ps| $l"; done
  for _p in $(pgrep podvisor); do
    for _t in /proc/"$_p"/task/*; do
      say "INFO stack ${_p}/${_t##*/} $(cat "$_t"/comm 2>/dev/null)| $(tr '\n' ' ' <"$_t"/stack 2>/dev/null)"
    done
  done
  timeout 20 systemctl list-jobs --no-pager 2>&1 | while IFS= read -r l; do say "INFO jobs| $l"; done
  timeout 20 systemctl status podvisor --no-pager 2>&1 | while IFS= read -r l; do say "INFO unit| $l"; done
  timeout 20 journalctl -b --no-pager -o short-monotonic -n 120 2>&1 | while IFS= read -r l; do say "INFO journal| $l"; done
  sync
  systemctl poweroff --force --force
}
say "INFO random: $(dmesg 2>&1 | grep -i -m1 'crng init done' || echo 'crng not initialised yet')"
hang=$(sed -n 's/.*podvisor_vm\.hang=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$hang" ] && hang_report "$hang" &

# --- install: pods from /etc/kubernetes/manifests run ----------------------------------------
errs=""
mkdir -p /etc/kubernetes/manifests /var/lib/podvisor/images/preload
cp /vm/multiarch.tar /var/lib/podvisor/images/preload/
for name in web sleeper; do
  manifest "$name" '{limits: {cpu: 100m, memory: 32Mi}}'
done
t=$(now)
out=$(dpkg -i /vm/podvisor-1.deb 2>&1) || errs="dpkg -i: $out;"
[ "$(systemctl is-enabled podvisor 2>&1)" = enabled ] || errs="$errs not enabled: $(systemctl is-enabled podvisor 2>&1);"
[ "$(prop ActiveState)" = active ] || errs="$errs not active after dpkg -i: $(prop ActiveState) $(prop Result);"
wait_until 120 two_running || errs="$errs $(running_pods) of 2 pods Running: $(podvisor pods 2>&1 | tr '\n' ' ');"
[ -f /usr/share/man/man1/podvisor.1.gz ] || errs="$errs no man page;"
[ -f /usr/share/bash-completion/completions/podvisor ] || errs="$errs no bash completion;"
# A fresh install's pod network: the default network written, the pod on it.
[ -f /etc/cni/net.d/87-podvisor-bridge.conflist ] || errs="$errs no default CNI network written;"
pod_ip=$(podvisor pods web -o json 2>/dev/null | sed -n 's/^ *"podIP": "\([^"]*\)".*/\1/p' | head -n1)
case "$pod_ip" in 10.86.*) ;; *) errs="$errs pod web has no pod IP ('$pod_ip');" ;; esac
say "INFO install to 2 pods running: $(($(now) - t)) s"
report install

# --- Type=notify: READY came (systemctl start returned active), STATUS says what runs --------
errs=""
status=$(prop StatusText)
case "$status" in "2 pods running, 0 failing"*) ;; *) errs="StatusText \"$status\";" ;; esac
[ "$(prop Type)" = notify ] || errs="$errs Type=$(prop Type);"
[ "$(prop WatchdogUSec)" = 30s ] || errs="$errs WatchdogUSec=$(prop WatchdogUSec);"
report ready-status

# --- upgrade: the daemon restarts, the containers keep their pids ---------------------------
errs=""
before=$(container_pids)
main=$(prop MainPID)
echo "# edited by the admin" >> /etc/podvisor/config.yaml
out=$(dpkg -i /vm/podvisor-2.deb 2>&1) || errs="dpkg -i (upgrade): $out;"
wait_until 60 ready_again "$main" || errs="$errs daemon not restarted (MainPID $(prop MainPID), was $main);"
wait_until 60 two_running || errs="$errs $(running_pods) of 2 pods Running after the upgrade;"
after=$(container_pids)
[ -n "$before" ] && [ "$before" = "$after" ] || errs="$errs container pids changed: [$before] -> [$after];"
dpkg-query -W -f='${Version}' podvisor | grep -q -- '-2$' || errs="$errs version $(dpkg-query -W -f='${Version}' podvisor);"
grep -q "edited by the admin" /etc/podvisor/config.yaml || errs="$errs the admin's config edit was lost;"
say "INFO upgrade: daemon $main -> $(prop MainPID), containers: $(echo "$after" | awk '{print $2}' | tr '\n' ' ')"
report upgrade-keeps-containers

# --- watchdog: a wedged sync loop is restarted, containers survive ---------------------------
errs=""
mkdir -p /etc/systemd/system/podvisor.service.d
cat > /etc/systemd/system/podvisor.service.d/wedge.conf <<'EOF'
[Service]
Environment=PODVISOR_TEST_WEDGE_FILE=/run/podvisor-test-wedge
WatchdogSec=6s
EOF
systemctl daemon-reload
systemctl restart podvisor || errs="restart with the test hook failed;"
wait_until 60 two_running || errs="$errs pods not Running after arming the hook;"
before=$(container_pids)
main=$(prop MainPID)
restarts=$(prop NRestarts)
t=$(now)
touch /run/podvisor-test-wedge
wait_until 90 ready_again "$main" || errs="$errs not restarted within 90 s (MainPID $(prop MainPID), NRestarts $(prop NRestarts));"
took=$(($(now) - t))
wait_until 60 two_running || errs="$errs pods not Running after the watchdog restart;"
[ "$(prop NRestarts)" -gt "$restarts" ] || errs="$errs NRestarts $(prop NRestarts) (was $restarts);"
journalctl -u podvisor --no-pager 2>/dev/null | grep -q -i 'watchdog timeout' ||
  errs="$errs no watchdog timeout in the journal;"
after=$(container_pids)
[ "$before" = "$after" ] || errs="$errs container pids changed: [$before] -> [$after];"
say "INFO watchdog: wedged daemon $main replaced by $(prop MainPID) after $took s"
rm -f /etc/systemd/system/podvisor.service.d/wedge.conf
systemctl daemon-reload
report watchdog-restart

# --- cgroupDriver: systemd: pods are slices, containers scopes, as `systemctl status` shows --
errs=""
units() { systemctl list-units --all --plain --no-legend "$@" 2>/dev/null | awk '{print $1}'; }
no_pods() { [ "$(running_pods)" -eq 0 ] && [ -z "$(container_pids)" ]; }
burst_gone() { [ -z "$(units 'podvisor-burstable-pod*')" ] && [ "$(running_pods)" -eq 1 ]; }
# The same measurements under both drivers, in this VM: container start and exec latency.
lat_cgroupfs=$(start_latency latfs)
exec_cgroupfs=$(exec_ms web)
rm -f /etc/kubernetes/manifests/web.yaml /etc/kubernetes/manifests/sleeper.yaml
wait_until 60 no_pods || errs="pods of the cgroupfs driver not removed: $(container_pids | tr '\n' ' ');"
printf '%s\n' 'cgroupDriver: systemd' >> /etc/podvisor/config.yaml
main=$(prop MainPID)
systemctl restart podvisor || errs="$errs restart with cgroupDriver: systemd failed;"
wait_until 60 ready_again "$main" ||
  errs="$errs not active with the systemd driver: $(journalctl -u podvisor -n 5 --no-pager 2>&1 | tr '\n' ' ');"
manifest web '{limits: {cpu: 100m, memory: 32Mi}}'
manifest burst '{requests: {cpu: 250m}, limits: {memory: 48Mi}}'
wait_until 120 two_running || errs="$errs $(running_pods) of 2 pods Running: $(podvisor pods 2>&1 | tr '\n' ' ');"
# systemd logs each connection to its private socket at debug level: one per D-Bus
# operation, not one per retry after a 10 s receive timeout (docs/systemd-driver-slow-starts.md)
systemd-analyze log-level debug
conns0=$(private_conns)
lat_systemd=$(start_latency latsd)
conns=$(($(private_conns) - conns0))
systemd-analyze log-level info
exec_systemd=$(exec_ms web)
case " $lat_systemd" in *timeout*) errs="$errs a pod not Running within 90 s under the systemd driver: $lat_systemd;" ;; esac
say "INFO start latency, manifest to Running (ms, 3 pods): cgroupfs $lat_cgroupfs/ systemd $lat_systemd(private-socket connections: $conns)"
say "INFO exec latency (ms): cgroupfs $exec_cgroupfs, systemd $exec_systemd"
# Gone means the latency pods' slices too: with the pod network their sandboxes are torn down
# (CNI DEL) after their containers, so the slices outlive the containers for a moment.
just_two() {
  [ "$(running_pods)" -eq 2 ] && [ "$(container_pids | wc -l)" -eq 2 ] &&
    [ "$(units 'podvisor-pod*.slice' | wc -l)" -eq 1 ]
}
wait_until 60 just_two || errs="$errs latency pods not removed: $(podvisor pods 2>&1 | tr '\n' ' ');"
tree=$(systemctl status podvisor.slice --no-pager 2>&1)
echo "$tree" | sed -n '1p;/CGroup:/,$p' | while IFS= read -r l; do say "INFO status| $l"; done
web_slice=$(units 'podvisor-pod*.slice')
burst_slice=$(units 'podvisor-burstable-pod*.slice')
for want in podvisor-burstable.slice "$web_slice" "$burst_slice"; do
  { [ -n "$want" ] && echo "$tree" | grep -q -- "$want"; } ||
    errs="$errs systemctl status podvisor.slice lacks ${want:-a pod slice}: $(echo "$tree" | tr '\n' ' ');"
done
[ "$(echo "$tree" | grep -c 'podvisor-.*\.scope')" -ge 2 ] ||
  errs="$errs no container scopes in: $(echo "$tree" | tr '\n' ' ');"
[ "$(systemctl show -p MemoryMax --value "$web_slice" 2>&1)" = 33554432 ] ||
  errs="$errs $web_slice MemoryMax=$(systemctl show -p MemoryMax --value "$web_slice" 2>&1);"
[ "$(systemctl show -p CPUQuotaPerSecUSec --value "$web_slice" 2>&1)" = 100ms ] ||
  errs="$errs $web_slice CPUQuotaPerSecUSec=$(systemctl show -p CPUQuotaPerSecUSec --value "$web_slice" 2>&1);"
# The Burstable slice's weight follows its pods' requests (250m: shares 256, weight 10).
[ "$(systemctl show -p CPUWeight --value podvisor-burstable.slice)" = 10 ] ||
  errs="$errs podvisor-burstable.slice CPUWeight=$(systemctl show -p CPUWeight --value podvisor-burstable.slice);"
bmem=/sys/fs/cgroup/podvisor.slice/podvisor-burstable.slice/$burst_slice/memory.max
[ "$(cat "$bmem" 2>&1)" = 50331648 ] || errs="$errs $bmem: $(cat "$bmem" 2>&1);"
# exec joins the container (through libcontainer's systemd manager: its scope)
out=$(podvisor exec web -- cat /etc/podvisor-platform 2>&1) || errs="$errs podvisor exec: $out;"
say "INFO systemd driver: $(echo "$tree" | grep -o 'podvisor-[^ ]*\.s[a-z]*' | sort -u | tr '\n' ' ')"
before=$(container_pids)
main=$(prop MainPID)
systemctl restart podvisor || errs="$errs restart failed;"
wait_until 60 ready_again "$main" || errs="$errs daemon not restarted;"
wait_until 60 two_running || errs="$errs $(running_pods) of 2 pods Running after the restart;"
after=$(container_pids)
{ [ -n "$before" ] && [ "$before" = "$after" ]; } || errs="$errs container pids changed: [$before] -> [$after];"
rm -f /etc/kubernetes/manifests/burst.yaml
wait_until 60 burst_gone ||
  errs="$errs units of the removed pod left: $(units 'podvisor-burstable-pod*' 'podvisor-*.scope' | tr '\n' ' ');"
[ "$(units 'podvisor-*.scope' | wc -l)" -eq 1 ] || errs="$errs scopes: $(units 'podvisor-*.scope' | tr '\n' ' ');"
[ -n "$errs" ] && say "INFO systemd driver journal: $(journalctl --no-pager -n 60 -o cat 2>&1 | grep -v -e '^Started\|^Finished' | tail -n 40 | tr '\n' '|')"
report systemd-driver

# --- remove: the service is gone, state stays; purge ----------------------------------------
errs=""
out=$(dpkg -r podvisor 2>&1) || errs="dpkg -r: $out;"
# debhelper masks the unit of a removed (not purged) package until purge.
case "$(prop LoadState)" in not-found | masked) ;; *) errs="$errs unit still loaded: $(prop LoadState);" ;; esac
[ "$(prop ActiveState)" = inactive ] || errs="$errs unit $(prop ActiveState);"
[ -e /usr/lib/systemd/system/podvisor.service ] && errs="$errs unit file still installed;"
pgrep -x podvisor >/dev/null && errs="$errs a podvisor daemon still runs: $(pgrep -a -x podvisor | tr '\n' ' ');"
[ -x /usr/bin/podvisor ] && errs="$errs /usr/bin/podvisor still there;"
[ -d /var/lib/podvisor/images ] || errs="$errs state removed by remove (only purge may);"
report remove
errs=""
out=$(dpkg --purge podvisor 2>&1) || errs="dpkg --purge: $out;"
[ -e /etc/podvisor/config.yaml ] && errs="$errs config left after purge;"
# Containers still run (removing the package stops the daemon only): purge keeps the state
# they use and says so.
echo "$out" | grep -q "containers still use /var/lib/podvisor" || errs="$errs purge said: $out;"
[ -d /var/lib/podvisor ] || errs="$errs state of running containers removed;"
report purge

say DONE
sync
systemctl poweroff --force --force
