//! pod::priority: a pod's priority and whether it is critical, as the kubelet's eviction
//! manager sees them (`IsCriticalPod` without its "every static pod" rule, which podvisor's
//! `--eviction-policy never` stands for).

use k8s_openapi::api::core::v1::Pod;

/// The priority the API server gives `system-cluster-critical`; anything at or above it is
/// critical (`scheduling.SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Whether a pod is never evicted: priorityClassName `system-node-critical` or
/// `system-cluster-critical`, or a priority of at least 2000000000.
pub fn is_critical(pod: &Pod) -> bool {
    critical_reason(pod).is_some()
}

/// Why a pod is critical: its priority class, or its priority; `None` when it is not.
pub fn critical_reason(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    match spec.priority_class_name.as_deref() {
        Some(c @ ("system-node-critical" | "system-cluster-critical")) => Some(c.to_string()),
        _ => spec
            .priority
            .filter(|p| *p >= SYSTEM_CRITICAL_PRIORITY)
            .map(|p| format!("priority {p}")),
    }
}

/// The pod's priority for ranking (`spec.priority`; the system classes' values when only
/// the class name is given, as a static pod's spec has no admission plugin to fill it).
pub fn priority(pod: &Pod) -> i32 {
    let Some(spec) = pod.spec.as_ref() else {
        return 0;
    };
    spec.priority
        .unwrap_or(match spec.priority_class_name.as_deref() {
            Some("system-node-critical") => SYSTEM_CRITICAL_PRIORITY + 1000,
            Some("system-cluster-critical") => SYSTEM_CRITICAL_PRIORITY,
            _ => 0,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    /// A pod with this priority class and priority.
    fn p(class: Option<&str>, prio: Option<i32>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                priority_class_name: class.map(String::from),
                priority: prio,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn why_a_pod_is_critical() {
        let cases = [
            (
                p(Some("system-node-critical"), None),
                Some("system-node-critical"),
            ),
            (
                p(Some("system-cluster-critical"), Some(5)),
                Some("system-cluster-critical"),
            ),
            (
                p(Some("high"), Some(2_000_000_000)),
                Some("priority 2000000000"),
            ),
            (p(Some("high"), Some(1_999_999_999)), None),
            (p(None, None), None),
            (Pod::default(), None),
        ];
        for (pod, want) in cases {
            assert_eq!(critical_reason(&pod).as_deref(), want, "{:?}", pod.spec);
            assert_eq!(is_critical(&pod), want.is_some());
        }
    }

    #[test]
    fn critical_pods_and_their_priority() {
        assert!(is_critical(&p(Some("system-node-critical"), None)));
        assert!(is_critical(&p(Some("system-cluster-critical"), None)));
        assert!(is_critical(&p(None, Some(2_000_000_000))));
        assert!(!is_critical(&p(None, Some(1_999_999_999))));
        assert!(!is_critical(&p(Some("high"), None)));
        assert_eq!(
            priority(&p(Some("system-node-critical"), None)),
            2_000_001_000
        );
    }
}
