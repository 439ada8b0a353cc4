//! The pod network at start: CHECK of every re-adopted sandbox's attachment and the GC pass
//! over attachment records nobody owns any more (see [`crate::network`]).

use super::super::sandbox::SandboxPaths;
use super::super::SandboxInfo;
use super::LinuxRuntime;
use std::collections::HashSet;
use std::fs;

impl LinuxRuntime {
    /// CHECK of each live sandbox's network attachment. A sandbox whose interface fails CHECK
    /// (the list's first plugin) is marked (`network.failed`) and not listed: its pod gets a
    /// new sandbox, as for a sandbox whose namespaces died (torn down now when none of its
    /// containers lives, else once the owner stopped them); a chained plugin's failure is
    /// logged and the sandbox kept. A sandbox made while pods had no network keeps its loopback-only
    /// namespace until it is made again (an upgrade restarts nothing).
    pub(super) fn check_networks(&self, live: Vec<SandboxInfo>) -> Vec<SandboxInfo> {
        let Some(net) = self.network() else {
            return live;
        };
        let mut out = Vec::with_capacity(live.len());
        for info in live {
            if info.host_network {
                out.push(info);
                continue;
            }
            let Ok(paths) = SandboxPaths::new(&self.cfg.sandbox_dirs(), &info.pod_uid) else {
                continue;
            };
            if info.pod_ips.is_empty() {
                log::info!(
                    "pod {}/{}: its sandbox has no pod network (made before networking was on); it gets one when it is made again",
                    info.pod_namespace,
                    info.pod_name
                );
                out.push(info);
                continue;
            }
            match net.check(&info.id, &paths.network_result()) {
                Ok(()) => out.push(info),
                // The interface is fine; a chained plugin's state is not what it reported
                // (Debian's portmap 1.1.1 fails its CHECK for IPv4-only pods, looking for an
                // IPv6 chain it never made): said, not worth restarting the pod for.
                Err(crate::network::NetworkError::Degraded(e)) => {
                    log::warn!(
                        "pod {}/{}: sandbox network CHECK of a chained plugin failed, the pod keeps its sandbox: {e}",
                        info.pod_namespace,
                        info.pod_name
                    );
                    out.push(info);
                }
                Err(e) => {
                    let message = e.to_string();
                    log::warn!(
                        "pod {}/{}: sandbox network CHECK failed, the sandbox is made again: {message}",
                        info.pod_namespace,
                        info.pod_name
                    );
                    if let Err(e) = fs::write(paths.network_failed(), &message) {
                        log::warn!("{}: {e}", paths.network_failed().display());
                    }
                    if !self.pod_has_live_container(&info.pod_uid) {
                        if let Err(e) = self.remove_partial_sandbox(&info.pod_uid) {
                            log::warn!("pod {}: {e}", info.pod_uid);
                        }
                    }
                }
            }
        }
        out
    }

    /// The GC pass: every attachment record of an earlier boot, or of a sandbox that no longer
    /// exists, is released (DEL with its recorded configuration); then the GC verb for
    /// networks that have it, with the attachments of the sandboxes still here as the valid
    /// ones.
    pub(super) fn collect_network_attachments(&self, live: &[SandboxInfo]) {
        // Also with networking off: what was attached while it was on is released.
        let net = &self.network;
        let dirs = self.cfg.sandbox_dirs();
        let live_ids: HashSet<&str> = live.iter().map(|s| s.id.as_str()).collect();
        let boot = self.boot_id.clone();
        let released = net.collect(
            |r| {
                live_ids.contains(r.id.as_str())
                    || self.busy_sandboxes.contains(&r.pod_uid)
                    // A sandbox kept for its live containers (torn down later, DEL first).
                    || (r.boot_id == boot && dirs.run.join(&r.pod_uid).is_dir())
            },
            |r| {
                SandboxPaths::new(&dirs, &r.pod_uid)
                    .map(|p| p.network_result())
                    .unwrap_or_default()
            },
            self.network_on,
        );
        if released > 0 {
            log::info!("pod network: released {released} attachment(s) of pods that are gone");
        }
    }
}
