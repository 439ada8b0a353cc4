//! sync::batch: which queued events the sync loop handles in one turn. The loop takes the
//! event it woke for and whatever else is already waiting, up to [`MAX_BATCH`], so a burst
//! (ten manifests written at once, their start results) costs one reconcile and one published
//! snapshot instead of one per event. A bounded batch keeps the loop turning over (health
//! checks, the systemd watchdog) under a flood; a [`SyncEvent::Shutdown`] ends the batch and
//! the loop after the events before it are handled.

use std::sync::mpsc::Receiver;

use super::SyncEvent;

/// The most events one turn handles before it reconciles.
pub(super) const MAX_BATCH: usize = 64;

/// `first` and the events already queued behind it (none is waited for), and whether a
/// shutdown was among them (it is not returned: the loop stops after the batch).
pub(super) fn drain_batch(first: SyncEvent, rx: &Receiver<SyncEvent>) -> (Vec<SyncEvent>, bool) {
    if matches!(first, SyncEvent::Shutdown) {
        return (Vec::new(), true);
    }
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(SyncEvent::Shutdown) => return (batch, true),
            Ok(ev) => batch.push(ev),
            // Empty, or every sender gone: the loop's next wait sees which.
            Err(_) => break,
        }
    }
    (batch, false)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;

    use super::*;
    use crate::sources::SourceEvent;

    fn removed(n: usize) -> SyncEvent {
        SyncEvent::Source(SourceEvent::FileRemoved {
            path: format!("/m/{n}.yaml").into(),
        })
    }

    fn paths(batch: &[SyncEvent]) -> Vec<String> {
        batch
            .iter()
            .map(|e| match e {
                SyncEvent::Source(SourceEvent::FileRemoved { path }) => path.display().to_string(),
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn takes_what_is_queued_in_order_and_stops_at_shutdown_or_the_cap() {
        struct Case {
            name: &'static str,
            queued: Vec<Option<usize>>, // None: a Shutdown
            want: Vec<String>,
            want_stop: bool,
            left: usize,
        }
        let p = |n: usize| format!("/m/{n}.yaml");
        let cases = [
            Case {
                name: "nothing queued",
                queued: vec![],
                want: vec![p(0)],
                want_stop: false,
                left: 0,
            },
            Case {
                name: "three queued, in order",
                queued: vec![Some(1), Some(2), Some(3)],
                want: vec![p(0), p(1), p(2), p(3)],
                want_stop: false,
                left: 0,
            },
            Case {
                name: "shutdown ends the batch; what follows it is left",
                queued: vec![Some(1), None, Some(2)],
                want: vec![p(0), p(1)],
                want_stop: true,
                left: 1,
            },
            Case {
                name: "the cap leaves the rest for the next turn",
                queued: (1..MAX_BATCH + 5).map(Some).collect(),
                want: (0..MAX_BATCH).map(p).collect(),
                want_stop: false,
                left: 5,
            },
        ];
        for c in cases {
            let (tx, rx) = channel();
            for q in &c.queued {
                tx.send(q.map_or(SyncEvent::Shutdown, removed))
                    .expect("send");
            }
            let (batch, stop) = drain_batch(removed(0), &rx);
            assert_eq!(paths(&batch), c.want, "{}", c.name);
            assert_eq!(stop, c.want_stop, "{}", c.name);
            assert_eq!(rx.try_iter().count(), c.left, "{}", c.name);
        }
    }

    #[test]
    fn a_shutdown_woken_for_is_handled_alone() {
        let (tx, rx) = channel();
        tx.send(removed(1)).expect("send");
        let (batch, stop) = drain_batch(SyncEvent::Shutdown, &rx);
        assert!(batch.is_empty() && stop);
        assert_eq!(rx.try_iter().count(), 1);
    }

    #[test]
    fn senders_gone_ends_the_batch_without_stopping() {
        let (tx, rx) = channel();
        tx.send(removed(1)).expect("send");
        drop(tx);
        let (batch, stop) = drain_batch(removed(0), &rx);
        assert_eq!(paths(&batch), ["/m/0.yaml", "/m/1.yaml"]);
        assert!(!stop, "the loop's next wait sees the disconnect");
    }
}
