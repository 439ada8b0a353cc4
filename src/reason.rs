//! reason: the kubelet's reason vocabulary, one enum per place a reason shows up.
//!
//! Users match on these strings (`kubectl get pods`, alerts on `CrashLoopBackOff`, scripts that
//! grep events), so every `as_str()` is the kubelet's exact spelling, from:
//! - a container's waiting state: `pkg/kubelet/container/sync_result.go` (`CrashLoopBackOff`,
//!   `RunContainerError`), `pkg/kubelet/images/types.go` (`ErrImagePull`, `ImagePullBackOff`,
//!   ...), `pkg/kubelet/kuberuntime/kuberuntime_container.go` (`CreateContainerConfigError`,
//!   `CreateContainerError`, ...) and `kubelet_pods.go` (`ContainerCreating`,
//!   `PodInitializing`) -> [`WaitingReason`];
//! - a container's terminated state: the runtime's words (containerd's `Completed`, `Error`,
//!   `OOMKilled`, `StartError`, `Unknown`) and the kubelet's `ContainerStatusUnknown` ->
//!   [`TerminatedReason`];
//! - events: `pkg/kubelet/events/event.go`, plus the few podvisor adds for its manifest
//!   sources -> [`EventReason`];
//! - a pod's status reason: `pkg/kubelet/lifecycle/predicate.go` (`OutOf<resource>`,
//!   `UnexpectedAdmissionError`), eviction (`Evicted`) -> [`PodReason`].
//!
//! Each enum serializes as its string (so status JSON, exit records and events stay
//! byte-identical) and parses back from it. This module is a leaf: it uses nothing of podvisor.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A string that is not one of an enum's reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a known {kind}")]
pub struct UnknownReason {
    /// Which vocabulary: "waiting reason", "event reason", ...
    pub kind: &'static str,
    pub value: String,
}

macro_rules! reasons {
    (
        $(#[$meta:meta])*
        $name:ident ($kind:literal) {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every reason, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The kubelet's spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownReason;

            fn from_str(s: &str) -> Result<Self, UnknownReason> {
                match s {
                    $( $text => Ok($name::$variant), )+
                    _ => Err(UnknownReason {
                        kind: $kind,
                        value: s.to_string(),
                    }),
                }
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl From<$name> for String {
            fn from(r: $name) -> String {
                r.as_str().to_string()
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

reasons! {
    /// Why a container is waiting (`state.waiting.reason`).
    WaitingReason ("waiting reason") {
        /// Its start is under way (the kubelet's default waiting reason).
        ContainerCreating => "ContainerCreating",
        /// An app container waits for the init containers.
        PodInitializing => "PodInitializing",
        /// It exited and its restart is backing off.
        CrashLoopBackOff => "CrashLoopBackOff",
        /// Its image pull failed.
        ErrImagePull => "ErrImagePull",
        /// Its image pull failed and the next one is backing off.
        ImagePullBackOff => "ImagePullBackOff",
        /// Its image is absent and `imagePullPolicy: Never` forbids pulling it.
        ErrImageNeverPull => "ErrImageNeverPull",
        /// Its image name does not parse.
        InvalidImageName => "InvalidImageName",
        /// Its image is present but cannot be read.
        ImageInspectError => "ImageInspectError",
        /// Its configuration cannot be built (env, mounts, security context, image config).
        CreateContainerConfigError => "CreateContainerConfigError",
        /// The runtime could not create it.
        CreateContainerError => "CreateContainerError",
        /// The runtime created it but could not start its process.
        RunContainerError => "RunContainerError",
        /// Its postStart hook failed (the container is killed).
        PostStartHookError => "PostStartHookError",
    }
}

reasons! {
    /// Why a container ended (`state.terminated.reason`, also in exit records).
    TerminatedReason ("terminated reason") {
        /// Exit code 0.
        Completed => "Completed",
        /// A non-zero exit code.
        Error => "Error",
        /// The kernel's OOM killer killed it.
        OomKilled => "OOMKilled",
        /// Its process never started (containerd's reason for a failed start).
        StartError => "StartError",
        /// What ended it is not known (its monitor died, its exit record is unreadable).
        ContainerStatusUnknown => "ContainerStatusUnknown",
        /// Its task is gone after a node reboot (containerd's `unknownExitReason`).
        Unknown => "Unknown",
    }
}

reasons! {
    /// An event's reason (`kubectl get events`, `podvisor events`).
    EventReason ("event reason") {
        /// A container was created.
        Created => "Created",
        /// A container was started.
        Started => "Started",
        /// A container could not be created or started, or its image not pulled.
        Failed => "Failed",
        /// A container is being stopped.
        Killing => "Killing",
        /// A container's restart or image pull is backing off.
        BackOff => "BackOff",
        /// A container did not stop within its grace period.
        ExceededGracePeriod => "ExceededGracePeriod",
        /// An image pull started.
        Pulling => "Pulling",
        /// An image pull finished (or the image was already present).
        Pulled => "Pulled",
        /// An image is absent and `imagePullPolicy: Never` forbids pulling it.
        ErrImageNeverPull => "ErrImageNeverPull",
        /// A probe failed.
        Unhealthy => "Unhealthy",
        /// A probe succeeded with a warning (an HTTP redirect to another host).
        ProbeWarning => "ProbeWarning",
        /// A postStart hook failed.
        FailedPostStartHook => "FailedPostStartHook",
        /// A preStop hook failed.
        FailedPreStopHook => "FailedPreStopHook",
        /// The pod's sandbox is gone and is created again.
        SandboxChanged => "SandboxChanged",
        /// The pod's sandbox could not be created.
        FailedCreatePodSandBox => "FailedCreatePodSandBox",
        /// Admission: not enough CPU left.
        OutOfCpu => "OutOfcpu",
        /// Admission: not enough memory left.
        OutOfMemory => "OutOfmemory",
        /// Admission: not enough ephemeral storage left.
        OutOfEphemeralStorage => "OutOfephemeral-storage",
        /// Admission: not enough huge pages of a size left (the kernel's page sizes on x86,
        /// arm64, riscv64, ppc64 and s390x).
        OutOfHugepages64Ki => "OutOfhugepages-64Ki",
        OutOfHugepages1Mi => "OutOfhugepages-1Mi",
        OutOfHugepages2Mi => "OutOfhugepages-2Mi",
        OutOfHugepages8Mi => "OutOfhugepages-8Mi",
        OutOfHugepages16Mi => "OutOfhugepages-16Mi",
        OutOfHugepages32Mi => "OutOfhugepages-32Mi",
        OutOfHugepages256Mi => "OutOfhugepages-256Mi",
        OutOfHugepages512Mi => "OutOfhugepages-512Mi",
        OutOfHugepages1Gi => "OutOfhugepages-1Gi",
        OutOfHugepages2Gi => "OutOfhugepages-2Gi",
        OutOfHugepages16Gi => "OutOfhugepages-16Gi",
        /// Admission failed for a reason that is not the pod's.
        UnexpectedAdmissionError => "UnexpectedAdmissionError",
        /// Admission: a hostPort of the pod is taken by another pod.
        NodePorts => "NodePorts",
        /// podvisor: a container exited (the kubelet only shows it in the status).
        Exited => "Exited",
        /// podvisor: a manifest source (file or URL) has an error, or a manifest is invalid.
        SourceError => "SourceError",
        /// podvisor: a second manifest names a pod that already exists.
        DuplicatePod => "DuplicatePod",
        /// podvisor: a changed manifest replaced its pod.
        Replaced => "Replaced",
        /// podvisor: only the pod's labels or annotations changed.
        MetadataUpdated => "MetadataUpdated",
        /// podvisor: a pod was pushed to (or deleted from) the node API's push source.
        Pushed => "Pushed",
        /// podvisor: an edited manifest's new generation failed; its last Ready generation
        /// runs again (safe updates).
        RolledBack => "RolledBack",
        /// The pod ran longer than its `activeDeadlineSeconds` and was killed.
        DeadlineExceeded => "DeadlineExceeded",
        /// A volume could not be set up or updated (the kubelet's volume manager).
        FailedMount => "FailedMount",
        /// podvisor: a volume with no source it knows became an emptyDir (API defaulting);
        /// the message names the dropped key.
        VolumeDefaulted => "VolumeDefaulted",
        /// The eviction manager evicted the pod (its message says why).
        Evicted => "Evicted",
        /// Node: an eviction threshold is met; node-level resources are reclaimed.
        EvictionThresholdMet => "EvictionThresholdMet",
        /// Node: the MemoryPressure condition became True / False.
        NodeHasInsufficientMemory => "NodeHasInsufficientMemory",
        NodeHasSufficientMemory => "NodeHasSufficientMemory",
        /// Node: the DiskPressure condition became True / False.
        NodeHasDiskPressure => "NodeHasDiskPressure",
        NodeHasNoDiskPressure => "NodeHasNoDiskPressure",
        /// Node: the PIDPressure condition became True / False.
        NodeHasInsufficientPID => "NodeHasInsufficientPID",
        NodeHasSufficientPID => "NodeHasSufficientPID",
        /// podvisor: an evicted pod starts again, its node pressure cleared.
        EvictionRecovered => "EvictionRecovered",
        /// podvisor: node: a threshold is met and no pod is evicted, because evicting cannot
        /// relieve it (or `--eviction-policy never`); the message says why.
        EvictionSkipped => "EvictionSkipped",
        /// podvisor: the API server (NodeRestriction, its validation or admission) refuses
        /// the pod's mirror pod; the pod runs locally only.
        MirrorPodRefused => "MirrorPodRefused",
    }
}

reasons! {
    /// Why a pod is in its phase (`status.reason`).
    PodReason ("pod reason") {
        /// Admission: not enough CPU left (phase Failed).
        OutOfCpu => "OutOfcpu",
        /// Admission: not enough memory left (phase Failed).
        OutOfMemory => "OutOfmemory",
        /// Admission: not enough ephemeral storage left (phase Failed).
        OutOfEphemeralStorage => "OutOfephemeral-storage",
        /// Admission: not enough huge pages of a size left (phase Failed).
        OutOfHugepages64Ki => "OutOfhugepages-64Ki",
        OutOfHugepages1Mi => "OutOfhugepages-1Mi",
        OutOfHugepages2Mi => "OutOfhugepages-2Mi",
        OutOfHugepages8Mi => "OutOfhugepages-8Mi",
        OutOfHugepages16Mi => "OutOfhugepages-16Mi",
        OutOfHugepages32Mi => "OutOfhugepages-32Mi",
        OutOfHugepages256Mi => "OutOfhugepages-256Mi",
        OutOfHugepages512Mi => "OutOfhugepages-512Mi",
        OutOfHugepages1Gi => "OutOfhugepages-1Gi",
        OutOfHugepages2Gi => "OutOfhugepages-2Gi",
        OutOfHugepages16Gi => "OutOfhugepages-16Gi",
        /// Admission failed for a reason that is not the pod's.
        UnexpectedAdmissionError => "UnexpectedAdmissionError",
        /// Admission: a hostPort of the pod is taken by another pod (phase Failed).
        NodePorts => "NodePorts",
        /// The pod's sandbox could not be created.
        FailedCreatePodSandBox => "FailedCreatePodSandBox",
        /// The eviction manager evicted the pod.
        Evicted => "Evicted",
        /// The node stopped reporting (set by the node lifecycle controller; kubectl shows
        /// such a pod as Unknown).
        NodeLost => "NodeLost",
        /// The pod ran longer than its `activeDeadlineSeconds` (phase Failed).
        DeadlineExceeded => "DeadlineExceeded",
    }
}

impl WaitingReason {
    /// Whether the container is failing rather than starting (systemd's `STATUS=` counts its
    /// pod as failing): every reason but `ContainerCreating` and `PodInitializing`.
    pub const fn is_failure(self) -> bool {
        !matches!(
            self,
            WaitingReason::ContainerCreating | WaitingReason::PodInitializing
        )
    }
}

impl PodReason {
    /// The admission reason for a resource the node has too little of: the kubelet's
    /// `"OutOf" + resourceName`.
    pub fn out_of(resource: &str) -> Option<PodReason> {
        match resource {
            "cpu" => Some(PodReason::OutOfCpu),
            "memory" => Some(PodReason::OutOfMemory),
            "ephemeral-storage" => Some(PodReason::OutOfEphemeralStorage),
            "hugepages-64Ki" => Some(PodReason::OutOfHugepages64Ki),
            "hugepages-1Mi" => Some(PodReason::OutOfHugepages1Mi),
            "hugepages-2Mi" => Some(PodReason::OutOfHugepages2Mi),
            "hugepages-8Mi" => Some(PodReason::OutOfHugepages8Mi),
            "hugepages-16Mi" => Some(PodReason::OutOfHugepages16Mi),
            "hugepages-32Mi" => Some(PodReason::OutOfHugepages32Mi),
            "hugepages-256Mi" => Some(PodReason::OutOfHugepages256Mi),
            "hugepages-512Mi" => Some(PodReason::OutOfHugepages512Mi),
            "hugepages-1Gi" => Some(PodReason::OutOfHugepages1Gi),
            "hugepages-2Gi" => Some(PodReason::OutOfHugepages2Gi),
            "hugepages-16Gi" => Some(PodReason::OutOfHugepages16Gi),
            _ => None,
        }
    }

    /// The event a kubelet records with this reason, if it records one.
    pub fn event(self) -> Option<EventReason> {
        match self {
            PodReason::OutOfCpu => Some(EventReason::OutOfCpu),
            PodReason::OutOfMemory => Some(EventReason::OutOfMemory),
            PodReason::OutOfEphemeralStorage => Some(EventReason::OutOfEphemeralStorage),
            PodReason::OutOfHugepages64Ki => Some(EventReason::OutOfHugepages64Ki),
            PodReason::OutOfHugepages1Mi => Some(EventReason::OutOfHugepages1Mi),
            PodReason::OutOfHugepages2Mi => Some(EventReason::OutOfHugepages2Mi),
            PodReason::OutOfHugepages8Mi => Some(EventReason::OutOfHugepages8Mi),
            PodReason::OutOfHugepages16Mi => Some(EventReason::OutOfHugepages16Mi),
            PodReason::OutOfHugepages32Mi => Some(EventReason::OutOfHugepages32Mi),
            PodReason::OutOfHugepages256Mi => Some(EventReason::OutOfHugepages256Mi),
            PodReason::OutOfHugepages512Mi => Some(EventReason::OutOfHugepages512Mi),
            PodReason::OutOfHugepages1Gi => Some(EventReason::OutOfHugepages1Gi),
            PodReason::OutOfHugepages2Gi => Some(EventReason::OutOfHugepages2Gi),
            PodReason::OutOfHugepages16Gi => Some(EventReason::OutOfHugepages16Gi),
            PodReason::UnexpectedAdmissionError => Some(EventReason::UnexpectedAdmissionError),
            PodReason::NodePorts => Some(EventReason::NodePorts),
            PodReason::FailedCreatePodSandBox => Some(EventReason::FailedCreatePodSandBox),
            PodReason::DeadlineExceeded => Some(EventReason::DeadlineExceeded),
            PodReason::Evicted => Some(EventReason::Evicted),
            PodReason::NodeLost => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kubelet's (and containerd's) exact strings, written out once more by hand so a
    /// renamed variant or a typo in the table above fails here.
    #[test]
    fn as_str_is_the_kubelet_spelling() {
        let waiting: Vec<&str> = WaitingReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            waiting,
            [
                "ContainerCreating",
                "PodInitializing",
                "CrashLoopBackOff",
                "ErrImagePull",
                "ImagePullBackOff",
                "ErrImageNeverPull",
                "InvalidImageName",
                "ImageInspectError",
                "CreateContainerConfigError",
                "CreateContainerError",
                "RunContainerError",
                "PostStartHookError",
            ]
        );
        let terminated: Vec<&str> = TerminatedReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            terminated,
            [
                "Completed",
                "Error",
                "OOMKilled",
                "StartError",
                "ContainerStatusUnknown",
                "Unknown"
            ]
        );
        let events: Vec<&str> = EventReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            events,
            [
                "Created",
                "Started",
                "Failed",
                "Killing",
                "BackOff",
                "ExceededGracePeriod",
                "Pulling",
                "Pulled",
                "ErrImageNeverPull",
                "Unhealthy",
                "ProbeWarning",
                "FailedPostStartHook",
                "FailedPreStopHook",
                "SandboxChanged",
                "FailedCreatePodSandBox",
                "OutOfcpu",
                "OutOfmemory",
                "OutOfephemeral-storage",
                "OutOfhugepages-64Ki",
                "OutOfhugepages-1Mi",
                "OutOfhugepages-2Mi",
                "OutOfhugepages-8Mi",
                "OutOfhugepages-16Mi",
                "OutOfhugepages-32Mi",
                "OutOfhugepages-256Mi",
                "OutOfhugepages-512Mi",
                "OutOfhugepages-1Gi",
                "OutOfhugepages-2Gi",
                "OutOfhugepages-16Gi",
                "UnexpectedAdmissionError",
                "NodePorts",
                "Exited",
                "SourceError",
                "DuplicatePod",
                "Replaced",
                "MetadataUpdated",
                "Pushed",
                "RolledBack",
                "DeadlineExceeded",
                "FailedMount",
                "VolumeDefaulted",
                "Evicted",
                "EvictionThresholdMet",
                "NodeHasInsufficientMemory",
                "NodeHasSufficientMemory",
                "NodeHasDiskPressure",
                "NodeHasNoDiskPressure",
                "NodeHasInsufficientPID",
                "NodeHasSufficientPID",
                "EvictionRecovered",
                "EvictionSkipped",
                "MirrorPodRefused",
            ]
        );
        let pods: Vec<&str> = PodReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            pods,
            [
                "OutOfcpu",
                "OutOfmemory",
                "OutOfephemeral-storage",
                "OutOfhugepages-64Ki",
                "OutOfhugepages-1Mi",
                "OutOfhugepages-2Mi",
                "OutOfhugepages-8Mi",
                "OutOfhugepages-16Mi",
                "OutOfhugepages-32Mi",
                "OutOfhugepages-256Mi",
                "OutOfhugepages-512Mi",
                "OutOfhugepages-1Gi",
                "OutOfhugepages-2Gi",
                "OutOfhugepages-16Gi",
                "UnexpectedAdmissionError",
                "NodePorts",
                "FailedCreatePodSandBox",
                "Evicted",
                "NodeLost",
                "DeadlineExceeded"
            ]
        );
    }

    fn round_trip<T>(all: &[T])
    where
        T: Copy + fmt::Debug + PartialEq + Serialize + for<'de> Deserialize<'de> + FromStr,
        T: fmt::Display,
        <T as FromStr>::Err: fmt::Debug,
    {
        for r in all {
            let text = r.to_string();
            let json = serde_json::to_string(r).expect("serialize");
            assert_eq!(
                json,
                format!("\"{text}\""),
                "{r:?} serializes as its string"
            );
            let back: T = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, *r);
            assert_eq!(text.parse::<T>().expect("parse"), *r);
        }
    }

    #[test]
    fn every_reason_round_trips_through_serde_and_from_str() {
        round_trip(WaitingReason::ALL);
        round_trip(TerminatedReason::ALL);
        round_trip(EventReason::ALL);
        round_trip(PodReason::ALL);
    }

    #[test]
    fn unknown_strings_are_refused_with_the_vocabulary_named() {
        let e = "Crashed".parse::<WaitingReason>().expect_err("unknown");
        assert_eq!(e.to_string(), "\"Crashed\" is not a known waiting reason");
        let e = serde_json::from_str::<TerminatedReason>("\"oomkilled\"").expect_err("case");
        assert!(
            e.to_string().contains("not a known terminated reason"),
            "{e}"
        );
    }

    #[test]
    fn reasons_compare_with_the_strings_they_replace() {
        assert!(TerminatedReason::Completed == *"Completed");
        assert!("PodInitializing" == WaitingReason::PodInitializing);
        let owned = String::from("OOMKilled");
        assert!(owned == TerminatedReason::OomKilled);
        assert_eq!(String::from(EventReason::BackOff), "BackOff");
    }

    #[test]
    fn admission_reasons_are_out_of_the_resource_and_recorded_as_events() {
        assert_eq!(PodReason::out_of("cpu"), Some(PodReason::OutOfCpu));
        assert_eq!(PodReason::out_of("memory"), Some(PodReason::OutOfMemory));
        assert_eq!(
            PodReason::out_of("ephemeral-storage"),
            Some(PodReason::OutOfEphemeralStorage)
        );
        assert_eq!(PodReason::out_of("pods"), None);
        assert_eq!(
            PodReason::out_of("hugepages-2Mi").map(PodReason::as_str),
            Some("OutOfhugepages-2Mi")
        );
        assert_eq!(PodReason::out_of("hugepages-3Mi"), None);
        for r in PodReason::ALL {
            if let Some(e) = r.event() {
                assert_eq!(e.as_str(), r.as_str(), "{r:?}");
            }
        }
        assert_eq!(
            PodReason::OutOfCpu.event().map(EventReason::as_str),
            Some("OutOfcpu")
        );
    }
}
