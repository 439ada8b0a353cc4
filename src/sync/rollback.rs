//! sync::rollback: safe updates, beyond the kubelet (which stops the old pod and hopes).
//!
//! Each pod's last Ready generation is remembered ([`super::generations`]). A new generation
//! (an edited manifest) of a pod that has one is on probation for the rollback deadline: a
//! container without a readiness probe is Ready as soon as it runs, so a command that crashes
//! after a second would look Ready; the generation replaces the last Ready one only if it is
//! Ready when the deadline ends ([`proven_ready`]). A generation with nothing to roll back to
//! (the pod's first, or with rollbacks off) counts once it is Ready. [`compute_rollback`], a
//! pure function, says when to give up on a generation on probation:
//! - at once when it cannot start: the pod is not admitted, its sandbox cannot be created, a
//!   container's start is refused by the runtime (CreateContainerConfigError,
//!   CreateContainerError, RunContainerError, ...), or an init container failed under
//!   restartPolicy Never;
//! - when a container crash-loops (it shows CrashLoopBackOff, as the kubelet would);
//! - when it is not Ready at the end of the deadline (`podvisor.io/rollback-after`, else
//!   the daemon's `--rollback-after`, 5m by default: `config::DEFAULT_ROLLBACK_AFTER`);
//!   image pull failures only count here, as a registry may come back.
//!
//! The loop then stops the new generation, starts the last Ready one again, records a
//! `RolledBack` warning and shows `rolled back: <why>` on the pod. While the manifest keeps the
//! bad generation's spec hash, the desired pod is the Ready generation (labels-only edits do
//! not retry it); any spec change clears the rollback and the new spec starts on probation. A
//! pod that never was Ready has nothing to roll back to and behaves as before.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use super::generations::{LastReady, RolledBack};
use super::{PodWorker, SyncLoop};
use crate::reason::{EventReason, WaitingReason};
use crate::staticpod::StaticPod;
use crate::status::EventType;

/// One container of a generation on probation, as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ContainerProbation {
    pub name: String,
    pub waiting: Option<(WaitingReason, String)>,
    /// Exit code of its last instance, if one ended.
    pub last_exit: Option<i32>,
}

/// What [`compute_rollback`] reads about a generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Probation {
    /// The pod has a Ready generation other than this one.
    pub has_ready_generation: bool,
    /// This generation has proven Ready (it is the last Ready one: never rolled back).
    pub was_ready: bool,
    /// It is Ready now (the Ready condition).
    pub ready: bool,
    /// The previous generation is still being removed: this one has not started yet.
    pub waiting_for_previous: bool,
    /// When it could start (created, or the previous generation gone).
    pub since: Instant,
    /// Not Ready by `since + deadline`: rolled back. Zero turns rollbacks off.
    pub deadline: Duration,
    /// Not admitted: the message.
    pub rejected: Option<String>,
    /// The sandbox creation failed: the message.
    pub sandbox_failed: Option<String>,
    /// An init container failed under restartPolicy Never: (container, exit code).
    pub init_failed: Option<(String, i32)>,
    pub containers: Vec<ContainerProbation>,
}

/// Why a generation is rolled back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RollbackCause {
    Rejected {
        message: String,
    },
    SandboxFailed {
        message: String,
    },
    StartRefused {
        container: String,
        reason: WaitingReason,
        message: String,
    },
    InitFailed {
        container: String,
        exit_code: i32,
    },
    CrashLoop {
        container: String,
        exit_code: i32,
    },
    NotReady {
        after: Duration,
        /// A container waiting for its image, if one is.
        waiting: Option<(String, WaitingReason)>,
    },
}

impl fmt::Display for RollbackCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RollbackCause::Rejected { message } => write!(f, "the pod was not admitted: {message}"),
            RollbackCause::SandboxFailed { message } => {
                write!(f, "the pod sandbox cannot be created: {message}")
            }
            RollbackCause::StartRefused {
                container,
                reason,
                message,
            } => write!(f, "container {container} cannot start: {reason}: {message}"),
            RollbackCause::InitFailed {
                container,
                exit_code,
            } => write!(
                f,
                "init container {container} failed with exit code {exit_code} under restartPolicy Never"
            ),
            RollbackCause::CrashLoop {
                container,
                exit_code,
            } => write!(
                f,
                "container {container} is crash-looping (last exit code {exit_code})"
            ),
            RollbackCause::NotReady { after, waiting } => {
                write!(f, "not Ready within {}", go_duration(*after))?;
                if let Some((c, r)) = waiting {
                    write!(f, " (container {c}: {r})")?;
                }
                Ok(())
            }
        }
    }
}

/// `5m0s`-style text of a whole-second duration, as Go prints it (sub-seconds dropped).
fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

/// Image waiting reasons: a registry or a preload may still fix them, so they only count
/// through the deadline.
fn image_wait(r: WaitingReason) -> bool {
    matches!(
        r,
        WaitingReason::ErrImagePull
            | WaitingReason::ImagePullBackOff
            | WaitingReason::ErrImageNeverPull
    )
}

/// Whether to roll the generation back now, and why (see the module docs).
pub(super) fn compute_rollback(now: Instant, p: &Probation) -> Option<RollbackCause> {
    if !p.has_ready_generation || p.was_ready || p.deadline.is_zero() || p.waiting_for_previous {
        return None;
    }
    if let Some(message) = &p.rejected {
        return Some(RollbackCause::Rejected {
            message: message.clone(),
        });
    }
    if let Some(message) = &p.sandbox_failed {
        return Some(RollbackCause::SandboxFailed {
            message: message.clone(),
        });
    }
    if let Some((container, exit_code)) = &p.init_failed {
        return Some(RollbackCause::InitFailed {
            container: container.clone(),
            exit_code: *exit_code,
        });
    }
    for c in &p.containers {
        match &c.waiting {
            Some((WaitingReason::CrashLoopBackOff, _)) => {
                return Some(RollbackCause::CrashLoop {
                    container: c.name.clone(),
                    exit_code: c.last_exit.unwrap_or_default(),
                })
            }
            Some((WaitingReason::ContainerCreating | WaitingReason::PodInitializing, _)) | None => {
            }
            Some((r, _)) if image_wait(*r) => {}
            Some((reason, message)) => {
                return Some(RollbackCause::StartRefused {
                    container: c.name.clone(),
                    reason: *reason,
                    message: message.clone(),
                })
            }
        }
    }
    if now >= p.since + p.deadline && !p.ready {
        let waiting = p.containers.iter().find_map(|c| match &c.waiting {
            Some((r, _)) if image_wait(*r) => Some((c.name.clone(), *r)),
            _ => None,
        });
        return Some(RollbackCause::NotReady {
            after: p.deadline,
            waiting,
        });
    }
    None
}

/// Whether the generation now counts as the pod's last Ready one: Ready at the end of its
/// probation, or Ready at all when it is not on probation.
pub(super) fn proven_ready(now: Instant, p: &Probation) -> bool {
    let on_probation = p.has_ready_generation && !p.deadline.is_zero();
    p.ready && !p.was_ready && (!on_probation || now >= p.since + p.deadline)
}

/// When [`compute_rollback`] or [`proven_ready`] next changes its mind by itself (the
/// deadline), if it can.
pub(super) fn probation_deadline(p: &Probation) -> Option<Instant> {
    let on = p.has_ready_generation && !p.was_ready && !p.deadline.is_zero();
    (on && !p.waiting_for_previous).then(|| p.since + p.deadline)
}

/// A write of the generation records (`<root>/pod-generations`) the loop hands to its
/// record writer.
#[derive(Debug)]
pub(super) enum GenerationWrite {
    Save(Box<LastReady>),
    Forget(String),
}

/// Each pod's last Ready generation and the generation rolled back from, by full name: the
/// state of safe updates. Its methods change it and return the record writes to make.
#[derive(Debug, Default)]
pub(super) struct Rollbacks {
    last_ready: BTreeMap<String, LastReady>,
}

impl Rollbacks {
    /// The generations recovered from the records of the previous run.
    pub(super) fn new(recovered: Vec<LastReady>) -> Rollbacks {
        Rollbacks {
            last_ready: recovered
                .into_iter()
                .map(|lr| (lr.pod.full_name.clone(), lr))
                .collect(),
        }
    }

    /// Whether pod `name` has a Ready generation other than `uid`.
    pub(super) fn has_other_ready(&self, name: &str, uid: &str) -> bool {
        self.last_ready
            .get(name)
            .is_some_and(|lr| lr.pod.uid() != uid)
    }

    /// Generation `pod` proved Ready: it is its pod's last Ready one from now on.
    pub(super) fn note_ready(&mut self, pod: &StaticPod) -> Option<GenerationWrite> {
        if self
            .last_ready
            .get(&pod.full_name)
            .is_some_and(|lr| lr.pod.uid() == pod.uid())
        {
            return None;
        }
        let lr = LastReady {
            pod: pod.clone(),
            rolled_back: None,
        };
        self.last_ready.insert(lr.pod.full_name.clone(), lr.clone());
        Some(GenerationWrite::Save(Box::new(lr)))
    }

    /// Records that generation `bad` of pod `name` is rolled back (`why`, at `at`); returns the
    /// last Ready generation to start again, and the record to write.
    pub(super) fn roll_back(
        &mut self,
        name: &str,
        bad: &StaticPod,
        why: String,
        at: String,
    ) -> Option<(StaticPod, GenerationWrite)> {
        let good = self.last_ready.get(name)?.pod.clone();
        let lr = LastReady {
            pod: good.clone(),
            rolled_back: Some(RolledBack {
                spec_hash: bad.spec_hash.clone(),
                uid: bad.uid().to_string(),
                why,
                at,
            }),
        };
        self.last_ready.insert(name.to_string(), lr.clone());
        Some((good, GenerationWrite::Save(Box::new(lr))))
    }

    /// While a manifest keeps the spec hash of a generation rolled back from, its pod is the
    /// last Ready generation; a spec change clears the rollback. Until its source gave valid
    /// content in this run (`loaded_from_source`), the desired pod may be the Ready
    /// generation itself, seeded from the desired-pod records of the previous run: that is no
    /// edit. Once the sources reported (`sources_ready`), generations of pods no source
    /// defines are forgotten.
    pub(super) fn apply(
        &mut self,
        desired: &mut BTreeMap<String, StaticPod>,
        sources_ready: bool,
        loaded_from_source: impl Fn(&str) -> bool,
    ) -> Vec<GenerationWrite> {
        let mut writes = Vec::new();
        let mut cleared = Vec::new();
        for (name, lr) in &self.last_ready {
            let (Some(rb), Some(sp)) = (&lr.rolled_back, desired.get_mut(name)) else {
                continue;
            };
            let same_source = sp.source == lr.pod.source;
            if sp.spec_hash == rb.spec_hash && same_source {
                *sp = lr.pod.clone();
            } else if sp.spec_hash != lr.pod.spec_hash
                || !same_source
                || loaded_from_source(&sp.source)
            {
                cleared.push(name.clone());
            }
        }
        for name in cleared {
            let Some(lr) = self.last_ready.get_mut(&name) else {
                continue;
            };
            log::info!("{name}: manifest spec changed again: the rollback is cleared");
            lr.rolled_back = None;
            writes.push(GenerationWrite::Save(Box::new(lr.clone())));
        }
        if sources_ready {
            let gone: Vec<String> = self
                .last_ready
                .keys()
                .filter(|n| !desired.contains_key(*n))
                .cloned()
                .collect();
            for name in gone {
                self.last_ready.remove(&name);
                writes.push(GenerationWrite::Forget(name));
            }
        }
        writes
    }

    /// "why" when generation `uid` of pod `name` runs because a newer one was rolled back.
    pub(super) fn rolled_back_why(&self, name: &str, uid: &str) -> Option<String> {
        let lr = self.last_ready.get(name)?;
        let rb = lr.rolled_back.as_ref()?;
        (lr.pod.uid() == uid).then(|| rb.why.clone())
    }
}

impl SyncLoop {
    /// What the rollback decision reads about worker `w`.
    fn probation_of(&self, name: &str, w: &PodWorker) -> Probation {
        let deadline = crate::pod::validation::rollback_after(&w.pod)
            .ok()
            .flatten()
            .unwrap_or(self.cfg.rollback_after);
        Probation {
            has_ready_generation: self.rollbacks.has_other_ready(name, &w.uid),
            was_ready: w.was_ready,
            ready: super::podstatus::ready_now(w),
            waiting_for_previous: w
                .blocked_by
                .as_ref()
                .is_some_and(|b| self.removals.contains(b)),
            since: w.since,
            deadline,
            rejected: w.rejected.as_ref().map(|(r, m)| format!("{r}: {m}")),
            sandbox_failed: match &w.sandbox {
                super::SandboxPhase::Failed { message } => Some(message.clone()),
                _ => None,
            },
            init_failed: w
                .failed
                .then(|| {
                    w.slots.iter().find_map(|s| {
                        let last = s.last.as_ref()?;
                        (s.kind == crate::runtime::ContainerKind::Init
                            && !s.succeeded
                            && !s.sidecar())
                        .then(|| (s.container.name.clone(), last.exit.exit_code))
                    })
                })
                .flatten(),
            containers: w
                .slots
                .iter()
                .map(|s| ContainerProbation {
                    name: s.container.name.clone(),
                    waiting: s.waiting.clone(),
                    last_exit: s.last.as_ref().map(|l| l.exit.exit_code),
                })
                .collect(),
        }
    }

    /// Remembers generations that proved Ready (a record once per generation).
    pub(super) fn note_ready_generations(&mut self) {
        let now = self.clock.now();
        let proven: Vec<String> = self
            .workers
            .iter()
            .filter(|(name, w)| proven_ready(now, &self.probation_of(name, w)))
            .map(|(name, _)| name.clone())
            .collect();
        let mut writes = Vec::new();
        for name in proven {
            let Some(w) = self.workers.get_mut(&name) else {
                continue;
            };
            w.was_ready = true;
            writes.extend(self.rollbacks.note_ready(&w.spec));
        }
        self.records.write_generations(writes);
    }

    /// Rolls back every generation [`compute_rollback`] gives up on; true if one was.
    pub(super) fn check_rollbacks(&mut self) -> bool {
        let now = self.clock.now();
        let mut due = Vec::new();
        for (name, w) in self.workers.iter() {
            if let Some(cause) = compute_rollback(now, &self.probation_of(name, w)) {
                due.push((name.clone(), cause));
            }
        }
        let any = !due.is_empty();
        for (name, cause) in due {
            self.roll_back(&name, &cause);
        }
        any
    }

    fn roll_back(&mut self, name: &str, cause: &RollbackCause) {
        let Some(w) = self.workers.get(name) else {
            return;
        };
        let bad_uid = w.uid.clone();
        let why = cause.to_string();
        let at = self.now_str();
        let Some((good, write)) = self.rollbacks.roll_back(name, &w.spec, why.clone(), at) else {
            return;
        };
        self.records.write_generations(vec![write]);
        let msg = format!(
            "{why}: rolled back to the last Ready generation (uid {bad_uid} -> {}); {} is not tried again until its spec changes",
            good.uid(),
            good.source
        );
        self.event(
            EventType::Warning,
            name,
            None,
            EventReason::RolledBack,
            &msg,
        );
        self.begin_removal(name, false);
        self.start_worker(good, Some(bad_uid));
    }

    /// Applies the rollbacks to the desired pods ([`Rollbacks::apply`]).
    pub(super) fn apply_rollbacks(&mut self, desired: &mut BTreeMap<String, StaticPod>) {
        let ready = self.sources_ready();
        let config = &self.config;
        let writes = self
            .rollbacks
            .apply(desired, ready, |source| config.loaded_from_source(source));
        if writes.iter().any(|w| matches!(w, GenerationWrite::Save(_))) {
            self.status.dirty = true;
        }
        self.records.write_generations(writes);
    }

    /// The earliest rollback deadline of a generation on probation.
    pub(super) fn rollback_deadline(&self) -> Option<Instant> {
        self.workers
            .iter()
            .filter_map(|(name, w)| probation_deadline(&self.probation_of(name, w)))
            .min()
    }

    /// "why" when worker `w` runs because a newer generation was rolled back.
    pub(super) fn rolled_back_why(&self, w: &PodWorker) -> Option<String> {
        self.rollbacks.rolled_back_why(&w.spec.full_name, &w.uid)
    }
}

#[cfg(test)]
mod tests;
