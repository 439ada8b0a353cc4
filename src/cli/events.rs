//! cli::events: `podvisor events [POD]` — kubectl's `get events` table (LAST SEEN, TYPE,
//! REASON, OBJECT, MESSAGE), with a NAMESPACE column when events span namespaces; repeated
//! events show kubectl's `3s (x5 over 20s)` in LAST SEEN.

use std::io::Write;
use std::path::Path;

use k8s_openapi::jiff::Timestamp;

use super::table::kubectl_table;
use super::time::event_age;
use super::{time, write_out, CliError};
use crate::api::{client, percent_encode};
use crate::status::EventRecord;

/// The events table, oldest first (the order the daemon keeps), ages relative to `now`.
pub fn render_events(events: &[EventRecord], now: Timestamp) -> String {
    let split = |e: &EventRecord| -> (String, String) {
        match e.pod.split_once('/') {
            Some((ns, name)) => (ns.to_string(), format!("pod/{name}")),
            None if e.pod.is_empty() => (String::new(), "node".to_string()),
            None => (String::new(), format!("pod/{}", e.pod)),
        }
    };
    let mut namespaces: Vec<String> = events
        .iter()
        .map(|e| split(e).0)
        .filter(|ns| !ns.is_empty())
        .collect();
    namespaces.sort();
    namespaces.dedup();
    let with_ns = namespaces.len() > 1;
    let mut text = String::new();
    if with_ns {
        text.push_str("NAMESPACE\t");
    }
    text.push_str("LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE\n");
    for e in events {
        let (ns, object) = split(e);
        if with_ns {
            text.push_str(&ns);
            text.push('\t');
        }
        let type_ = e.type_.as_str();
        // kubectl: a repeated event shows `<last> (xN over <first>)`.
        let seen = event_age(e, now);
        text.push_str(&format!(
            "{seen}\t{type_}\t{}\t{object}\t{}\n",
            e.reason,
            // A message is one table cell: no tabs or newlines inside.
            e.message.trim().replace(['\t', '\n'], " ")
        ));
    }
    kubectl_table(&text)
}

/// `podvisor events [POD]`.
pub fn get_events(
    socket: &Path,
    pod: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let path = match pod {
        Some(p) => format!("/events?pod={}", percent_encode(p)),
        None => "/events".to_string(),
    };
    let events: Vec<EventRecord> = client::get_json(socket, &path)?;
    if events.is_empty() {
        return write_out(err, "No events found\n");
    }
    write_out(out, &render_events(&events, time::now()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::EventType;

    fn ev(pod: &str, type_: EventType, reason: &str, msg: &str, last: &str) -> EventRecord {
        EventRecord {
            type_,
            reason: reason.into(),
            message: msg.into(),
            pod: pod.into(),
            container: None,
            count: 1,
            first_timestamp: last.into(),
            last_timestamp: last.into(),
        }
    }

    #[test]
    fn events_table() {
        let now: Timestamp = "2024-01-02T03:05:00Z".parse().expect("now");
        let events = vec![
            ev(
                "default/web-n1",
                EventType::Normal,
                "Started",
                "Started container app",
                "2024-01-02T03:04:00Z",
            ),
            ev(
                "default/web-n1",
                EventType::Warning,
                "BackOff",
                "Back-off restarting\tfailed container",
                "2024-01-02T03:04:58Z",
            ),
            ev(
                "",
                EventType::Warning,
                "SourceError",
                "bad.yaml:1:1: not a Pod",
                "2024-01-02T02:05:00Z",
            ),
        ];
        assert_eq!(
            render_events(&events, now),
            "LAST SEEN   TYPE      REASON        OBJECT       MESSAGE\n\
             60s         Normal    Started       pod/web-n1   Started container app\n\
             2s          Warning   BackOff       pod/web-n1   Back-off restarting failed container\n\
             60m         Warning   SourceError   node         bad.yaml:1:1: not a Pod\n"
        );
        let mut mixed = events.clone();
        mixed.push(ev(
            "kube-system/etcd-n1",
            EventType::Normal,
            "Pulled",
            "ok",
            "2024-01-02T03:05:00Z",
        ));
        let mut repeated = ev(
            "default/web-n1",
            EventType::Warning,
            "Unhealthy",
            "Liveness probe failed: connection refused",
            "2024-01-02T03:04:57Z",
        );
        repeated.count = 5;
        repeated.first_timestamp = "2024-01-02T03:04:40Z".into();
        let t = render_events(&[repeated], now);
        assert!(t.contains("3s (x5 over 20s)   Warning   Unhealthy"), "{t}");
        let t = render_events(&mixed, now);
        assert!(t.starts_with("NAMESPACE     LAST SEEN"), "{t}");
        assert!(t.contains("kube-system   0s"), "{t}");
        assert_eq!(
            render_events(&[], now),
            "LAST SEEN   TYPE   REASON   OBJECT   MESSAGE\n"
        );
    }
}
