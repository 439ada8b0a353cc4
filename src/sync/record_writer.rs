//! record_writer: the `desired-store` thread, which writes and deletes the desired-pod records
//! of [`super::store`] and the pod-generation records of [`super::generations`] in the order
//! the sync loop asks for them, so the loop never waits for a disk (each record costs a file
//! and a directory fsync: 1-2 ms on the development machine's disk, tens of ms on an SD card).

use std::io;
use std::sync::mpsc;
use std::thread;

use super::generations::{GenerationStore, LastReady};
use super::rollback::GenerationWrite;
use super::store::DesiredStore;
use crate::staticpod::StaticPod;

/// The loop's records on disk: the desired pods (`<root>/static-pods`), each pod's last Ready
/// generation (`<root>/pod-generations`), both written through the [`Writer`] thread, and
/// the pushed pods' manifests (`<root>/api-pods`). Nothing under `podvisor play`.
#[derive(Default)]
pub(super) struct Records {
    pub(super) store: Option<DesiredStore>,
    pub(super) writer: Option<Writer>,
    pub(super) api: Option<crate::sources::api::ApiPodStore>,
}

impl Records {
    /// Persists a desired pod through the writer thread: the pod's first job does not wait
    /// for the disk.
    pub(super) fn save_desired(&self, sp: &StaticPod) {
        if let Some(w) = &self.writer {
            w.save(sp);
        }
    }

    /// Deletes a desired pod's record, after every write asked before.
    pub(super) fn forget_desired(&self, uid: &str) {
        if let Some(w) = &self.writer {
            w.remove(uid);
        }
    }

    /// Waits until the records asked for are on disk (tests).
    pub(super) fn flush(&self) {
        if let Some(w) = &self.writer {
            w.flush();
        }
    }

    /// Whether the desired-pod record of `uid` is missing from disk (a failed write).
    pub(super) fn missing(&self, uid: &str) -> bool {
        self.store.as_ref().is_some_and(|s| !s.contains(uid))
    }

    /// Writes or forgets generation records: the loop does not wait for their fsyncs.
    pub(super) fn write_generations(&self, writes: Vec<GenerationWrite>) {
        let Some(writer) = &self.writer else {
            return;
        };
        for w in writes {
            match w {
                GenerationWrite::Save(lr) => writer.save_generation(&lr),
                GenerationWrite::Forget(name) => writer.remove_generation(&name),
            }
        }
    }
}

/// One request to the [`Writer`] thread.
enum Op {
    Save(Box<StaticPod>),
    Remove(String),
    SaveGeneration(Box<LastReady>),
    RemoveGeneration(String),
    Flush(mpsc::SyncSender<()>),
}

/// Writes and deletes desired-pod records, and the pod-generation records of
/// [`super::generations`], on a thread of its own (`desired-store`), in the order they were
/// asked for. A failure is logged there, naming the pod, as a warning the first
/// time and then at debug level until the record is written; a record a full disk refused is
/// asked for again at the next resync. Dropping the writer waits for everything
/// asked before (a daemon stopped with SIGTERM leaves its records complete).
pub struct Writer {
    tx: Option<mpsc::Sender<Op>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Writer {
    pub fn start(store: DesiredStore, generations: GenerationStore) -> io::Result<Writer> {
        let (tx, rx) = mpsc::channel::<Op>();
        let thread = thread::Builder::new()
            .name("desired-store".into())
            .spawn(move || {
                // Pods whose last save failed: a full disk refuses the same record again at
                // every resync, and only the first refusal is worth a warning (flash).
                let mut failing = std::collections::HashSet::new();
                for op in rx {
                    match op {
                        Op::Save(sp) => match store.save(&sp) {
                            Ok(()) => {
                                if failing.remove(sp.uid()) {
                                    log::info!(
                                        "pod {}: desired-pod record written again",
                                        sp.uid()
                                    );
                                }
                            }
                            Err(e) if failing.contains(sp.uid()) => {
                                log::debug!("{}: {e}", sp.full_name)
                            }
                            Err(e) => {
                                log::warn!("{}: {e}", sp.full_name);
                                failing.insert(sp.uid().to_string());
                            }
                        },
                        Op::Remove(uid) => {
                            failing.remove(&uid);
                            if let Err(e) = store.remove(&uid) {
                                log::warn!("pod {uid}: {e}");
                            }
                        }
                        // A generation record is written once per generation and at each
                        // rollback; one a full disk refused is lost until the next of those.
                        Op::SaveGeneration(lr) => {
                            if let Err(e) = generations.save(&lr) {
                                log::warn!("{}: {e}", lr.pod.full_name);
                            }
                        }
                        Op::RemoveGeneration(full_name) => {
                            if let Err(e) = generations.remove(&full_name) {
                                log::warn!("{full_name}: {e}");
                            }
                        }
                        Op::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    fn send(&self, op: Op) {
        if let Some(tx) = &self.tx {
            // The thread ends only when this writer is dropped.
            let _ = tx.send(op);
        }
    }

    /// Writes `p`'s record durably, after everything asked before.
    pub fn save(&self, p: &StaticPod) {
        self.send(Op::Save(Box::new(p.clone())));
    }

    /// Deletes pod `uid`'s record, after everything asked before.
    pub fn remove(&self, uid: &str) {
        self.send(Op::Remove(uid.to_string()));
    }

    /// Writes a pod's last Ready generation (and what was rolled back from it) durably,
    /// after everything asked before.
    pub fn save_generation(&self, lr: &LastReady) {
        self.send(Op::SaveGeneration(Box::new(lr.clone())));
    }

    /// Deletes the generation record of `full_name`, after everything asked before.
    pub fn remove_generation(&self, full_name: &str) {
        self.send(Op::RemoveGeneration(full_name.to_string()));
    }

    /// Waits until everything asked before is done.
    pub fn flush(&self) {
        let (done, wait) = mpsc::sync_channel(1);
        self.send(Op::Flush(done));
        let _ = wait.recv();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
