//! raw: phase one of reading a KubeletConfiguration file — serde types carrying every field of
//! `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`, under its exact JSON name.
//!
//! The field list follows kubernetes/kubelet `config/v1beta1/types.go`. Every struct denies
//! unknown fields, so a typo is an error with a line:column instead of a silently ignored
//! setting. Fields podvisor implements are wrapped in `Spanned` so that value errors found in
//! phase two can also point at the line. Nested objects of fields podvisor does not implement
//! are modelled where the kubelet's schema is small and stable; `logging` (component-base,
//! evolving) is accepted as any value. Everything is `Option`: absent and `null` are "not set".

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

type StringMap = BTreeMap<String, String>;

/// Declares `RawKubeletConfiguration` from (rust name, JSON name, type) triples, plus the list
/// of JSON names and a way to ask which of them the file set.
macro_rules! kubelet_configuration {
    ($( $field:ident => $json:literal : $ty:ty, )*) => {
        /// A KubeletConfiguration document as written, before validation.
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawKubeletConfiguration {
            #[serde(rename = "apiVersion")]
            pub api_version: Option<Spanned<String>>,
            pub kind: Option<Spanned<String>>,
            $(
                #[serde(rename = $json)]
                pub $field: Option<$ty>,
            )*
        }

        impl RawKubeletConfiguration {
            /// Every KubeletConfiguration field name except `apiVersion` and `kind`.
            pub const FIELD_NAMES: &'static [&'static str] = &[$($json),*];

            /// JSON names of the fields present (not absent, not null) in the document,
            /// excluding `apiVersion` and `kind`, in declaration order.
            pub fn present_fields(&self) -> Vec<&'static str> {
                let mut present = Vec::new();
                $(
                    if self.$field.is_some() {
                        present.push($json);
                    }
                )*
                present
            }
        }
    };
}

kubelet_configuration! {
    enable_server => "enableServer": bool,
    static_pod_path => "staticPodPath": Spanned<String>,
    pod_logs_dir => "podLogsDir": Spanned<String>,
    sync_frequency => "syncFrequency": Spanned<String>,
    file_check_frequency => "fileCheckFrequency": Spanned<String>,
    http_check_frequency => "httpCheckFrequency": Spanned<String>,
    static_pod_url => "staticPodURL": Spanned<String>,
    static_pod_url_header => "staticPodURLHeader": Spanned<BTreeMap<String, Vec<String>>>,
    address => "address": String,
    port => "port": i32,
    read_only_port => "readOnlyPort": i32,
    tls_cert_file => "tlsCertFile": String,
    tls_private_key_file => "tlsPrivateKeyFile": String,
    tls_cipher_suites => "tlsCipherSuites": Vec<String>,
    tls_curve_preferences => "tlsCurvePreferences": Vec<i32>,
    tls_min_version => "tlsMinVersion": String,
    rotate_certificates => "rotateCertificates": bool,
    server_tls_bootstrap => "serverTLSBootstrap": bool,
    authentication => "authentication": RawAuthentication,
    authorization => "authorization": RawAuthorization,
    registry_pull_qps => "registryPullQPS": i32,
    registry_burst => "registryBurst": i32,
    image_pull_credentials_verification_policy => "imagePullCredentialsVerificationPolicy": String,
    preloaded_images_verification_allowlist => "preloadedImagesVerificationAllowlist": Vec<String>,
    event_record_qps => "eventRecordQPS": i32,
    event_burst => "eventBurst": i32,
    enable_debugging_handlers => "enableDebuggingHandlers": bool,
    enable_contention_profiling => "enableContentionProfiling": bool,
    healthz_port => "healthzPort": i32,
    healthz_bind_address => "healthzBindAddress": String,
    oom_score_adj => "oomScoreAdj": i32,
    cluster_domain => "clusterDomain": Spanned<String>,
    cluster_dns => "clusterDNS": Vec<Spanned<String>>,
    streaming_connection_idle_timeout => "streamingConnectionIdleTimeout": String,
    node_status_update_frequency => "nodeStatusUpdateFrequency": Spanned<String>,
    node_status_report_frequency => "nodeStatusReportFrequency": Spanned<String>,
    node_lease_duration_seconds => "nodeLeaseDurationSeconds": Spanned<i32>,
    image_minimum_gc_age => "imageMinimumGCAge": Spanned<String>,
    image_maximum_gc_age => "imageMaximumGCAge": String,
    image_gc_high_threshold_percent => "imageGCHighThresholdPercent": Spanned<i32>,
    image_gc_low_threshold_percent => "imageGCLowThresholdPercent": Spanned<i32>,
    volume_stats_agg_period => "volumeStatsAggPeriod": String,
    kubelet_cgroups => "kubeletCgroups": String,
    system_cgroups => "systemCgroups": String,
    cgroup_root => "cgroupRoot": Spanned<String>,
    cgroups_per_qos => "cgroupsPerQOS": bool,
    cgroup_driver => "cgroupDriver": Spanned<String>,
    cpu_manager_policy => "cpuManagerPolicy": String,
    single_process_oom_kill => "singleProcessOOMKill": bool,
    cpu_manager_policy_options => "cpuManagerPolicyOptions": StringMap,
    cpu_manager_reconcile_period => "cpuManagerReconcilePeriod": String,
    memory_manager_policy => "memoryManagerPolicy": String,
    topology_manager_policy => "topologyManagerPolicy": String,
    topology_manager_scope => "topologyManagerScope": String,
    topology_manager_policy_options => "topologyManagerPolicyOptions": StringMap,
    qos_reserved => "qosReserved": StringMap,
    runtime_request_timeout => "runtimeRequestTimeout": String,
    hairpin_mode => "hairpinMode": String,
    max_pods => "maxPods": i32,
    pod_cidr => "podCIDR": Spanned<String>,
    pod_pids_limit => "podPidsLimit": Spanned<i64>,
    resolv_conf => "resolvConf": String,
    run_once => "runOnce": bool,
    cpu_cfs_quota => "cpuCFSQuota": bool,
    cpu_cfs_quota_period => "cpuCFSQuotaPeriod": String,
    node_status_max_images => "nodeStatusMaxImages": Spanned<i32>,
    max_open_files => "maxOpenFiles": i64,
    content_type => "contentType": String,
    kube_api_qps => "kubeAPIQPS": Spanned<i32>,
    kube_api_burst => "kubeAPIBurst": Spanned<i32>,
    serialize_image_pulls => "serializeImagePulls": bool,
    max_parallel_image_pulls => "maxParallelImagePulls": i32,
    eviction_hard => "evictionHard": StringMap,
    eviction_soft => "evictionSoft": StringMap,
    eviction_soft_grace_period => "evictionSoftGracePeriod": StringMap,
    eviction_pressure_transition_period => "evictionPressureTransitionPeriod": Spanned<String>,
    eviction_max_pod_grace_period => "evictionMaxPodGracePeriod": Spanned<i32>,
    eviction_minimum_reclaim => "evictionMinimumReclaim": StringMap,
    merge_default_eviction_settings => "mergeDefaultEvictionSettings": bool,
    pods_per_core => "podsPerCore": i32,
    enable_controller_attach_detach => "enableControllerAttachDetach": bool,
    protect_kernel_defaults => "protectKernelDefaults": bool,
    make_iptables_util_chains => "makeIPTablesUtilChains": bool,
    iptables_masquerade_bit => "iptablesMasqueradeBit": i32,
    iptables_drop_bit => "iptablesDropBit": i32,
    feature_gates => "featureGates": BTreeMap<String, bool>,
    fail_swap_on => "failSwapOn": bool,
    memory_swap => "memorySwap": RawMemorySwap,
    container_log_max_size => "containerLogMaxSize": Spanned<String>,
    container_log_max_files => "containerLogMaxFiles": Spanned<i32>,
    container_log_max_workers => "containerLogMaxWorkers": i32,
    container_log_monitor_interval => "containerLogMonitorInterval": String,
    config_map_and_secret_change_detection_strategy => "configMapAndSecretChangeDetectionStrategy": String,
    system_reserved => "systemReserved": StringMap,
    kube_reserved => "kubeReserved": StringMap,
    reserved_system_cpus => "reservedSystemCPUs": String,
    show_hidden_metrics_for_version => "showHiddenMetricsForVersion": String,
    system_reserved_cgroup => "systemReservedCgroup": String,
    kube_reserved_cgroup => "kubeReservedCgroup": String,
    enforce_node_allocatable => "enforceNodeAllocatable": Vec<String>,
    allowed_unsafe_sysctls => "allowedUnsafeSysctls": Vec<Spanned<String>>,
    default_pod_sysctls => "defaultPodSysctls": StringMap,
    volume_plugin_dir => "volumePluginDir": String,
    provider_id => "providerID": String,
    kernel_memcg_notification => "kernelMemcgNotification": bool,
    logging => "logging": IgnoredAny,
    enable_system_log_handler => "enableSystemLogHandler": bool,
    enable_system_log_query => "enableSystemLogQuery": bool,
    shutdown_grace_period => "shutdownGracePeriod": String,
    shutdown_grace_period_critical_pods => "shutdownGracePeriodCriticalPods": String,
    shutdown_grace_period_by_pod_priority => "shutdownGracePeriodByPodPriority": Vec<RawShutdownGracePeriodByPodPriority>,
    crash_loop_back_off => "crashLoopBackOff": RawCrashLoopBackOff,
    reserved_memory => "reservedMemory": Vec<RawMemoryReservation>,
    enable_profiling_handler => "enableProfilingHandler": bool,
    enable_debug_flags_handler => "enableDebugFlagsHandler": bool,
    seccomp_default => "seccompDefault": bool,
    memory_throttling_factor => "memoryThrottlingFactor": f64,
    memory_reservation_policy => "memoryReservationPolicy": String,
    register_with_taints => "registerWithTaints": Vec<Taint>,
    register_node => "registerNode": bool,
    tracing => "tracing": RawTracing,
    local_storage_capacity_isolation => "localStorageCapacityIsolation": bool,
    container_runtime_endpoint => "containerRuntimeEndpoint": String,
    image_service_endpoint => "imageServiceEndpoint": String,
    fail_cgroup_v1 => "failCgroupV1": bool,
    user_namespaces => "userNamespaces": RawUserNamespaces,
}

/// `authentication` (KubeletAuthentication).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuthentication {
    pub x509: Option<RawX509Authentication>,
    pub webhook: Option<RawWebhookAuthentication>,
    pub anonymous: Option<RawAnonymousAuthentication>,
}

/// `authentication.x509`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawX509Authentication {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<String>,
}

/// `authentication.webhook`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebhookAuthentication {
    pub enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: Option<String>,
}

/// `authentication.anonymous`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAnonymousAuthentication {
    pub enabled: Option<bool>,
}

/// `authorization` (KubeletAuthorization).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuthorization {
    pub mode: Option<String>,
    pub webhook: Option<RawWebhookAuthorization>,
}

/// `authorization.webhook`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: Option<String>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: Option<String>,
}

/// `memorySwap` (MemorySwapConfiguration).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMemorySwap {
    #[serde(rename = "swapBehavior")]
    pub swap_behavior: Option<String>,
}

/// `crashLoopBackOff` (CrashLoopBackOffConfig).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCrashLoopBackOff {
    #[serde(rename = "maxContainerRestartPeriod")]
    pub max_container_restart_period: Option<String>,
}

/// One `shutdownGracePeriodByPodPriority` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShutdownGracePeriodByPodPriority {
    pub priority: Option<i32>,
    #[serde(rename = "shutdownGracePeriodSeconds")]
    pub shutdown_grace_period_seconds: Option<i64>,
}

/// One `reservedMemory` entry (MemoryReservation).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMemoryReservation {
    #[serde(rename = "numaNode")]
    pub numa_node: Option<i32>,
    pub limits: Option<StringMap>,
}

/// `tracing` (component-base TracingConfiguration).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTracing {
    pub endpoint: Option<String>,
    #[serde(rename = "samplingRatePerMillion")]
    pub sampling_rate_per_million: Option<i32>,
}

/// `userNamespaces` (UserNamespaces).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUserNamespaces {
    #[serde(rename = "idsPerPod")]
    pub ids_per_pod: Option<i64>,
}

pub(super) fn fmt_location(l: &Location) -> String {
    if l.line() == 0 {
        String::new()
    } else {
        format!(":{}:{}", l.line(), l.column())
    }
}

/// A string field that is set to something other than "" (the kubelet's zero value).
pub(super) fn non_empty(v: &Option<Spanned<String>>) -> Option<&Spanned<String>> {
    v.as_ref().filter(|s| !s.value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON names of kubernetes/kubelet config/v1beta1 KubeletConfiguration (upstream
    /// master, 126 fields besides TypeMeta), sorted. A change here must come from upstream.
    const UPSTREAM_FIELDS: &[&str] = &[
        "address",
        "allowedUnsafeSysctls",
        "authentication",
        "authorization",
        "cgroupDriver",
        "cgroupRoot",
        "cgroupsPerQOS",
        "clusterDNS",
        "clusterDomain",
        "configMapAndSecretChangeDetectionStrategy",
        "containerLogMaxFiles",
        "containerLogMaxSize",
        "containerLogMaxWorkers",
        "containerLogMonitorInterval",
        "containerRuntimeEndpoint",
        "contentType",
        "cpuCFSQuota",
        "cpuCFSQuotaPeriod",
        "cpuManagerPolicy",
        "cpuManagerPolicyOptions",
        "cpuManagerReconcilePeriod",
        "crashLoopBackOff",
        "defaultPodSysctls",
        "enableContentionProfiling",
        "enableControllerAttachDetach",
        "enableDebugFlagsHandler",
        "enableDebuggingHandlers",
        "enableProfilingHandler",
        "enableServer",
        "enableSystemLogHandler",
        "enableSystemLogQuery",
        "enforceNodeAllocatable",
        "eventBurst",
        "eventRecordQPS",
        "evictionHard",
        "evictionMaxPodGracePeriod",
        "evictionMinimumReclaim",
        "evictionPressureTransitionPeriod",
        "evictionSoft",
        "evictionSoftGracePeriod",
        "failCgroupV1",
        "failSwapOn",
        "featureGates",
        "fileCheckFrequency",
        "hairpinMode",
        "healthzBindAddress",
        "healthzPort",
        "httpCheckFrequency",
        "imageGCHighThresholdPercent",
        "imageGCLowThresholdPercent",
        "imageMaximumGCAge",
        "imageMinimumGCAge",
        "imagePullCredentialsVerificationPolicy",
        "imageServiceEndpoint",
        "iptablesDropBit",
        "iptablesMasqueradeBit",
        "kernelMemcgNotification",
        "kubeAPIBurst",
        "kubeAPIQPS",
        "kubeReserved",
        "kubeReservedCgroup",
        "kubeletCgroups",
        "localStorageCapacityIsolation",
        "logging",
        "makeIPTablesUtilChains",
        "maxOpenFiles",
        "maxParallelImagePulls",
        "maxPods",
        "memoryManagerPolicy",
        "memoryReservationPolicy",
        "memorySwap",
        "memoryThrottlingFactor",
        "mergeDefaultEvictionSettings",
        "nodeLeaseDurationSeconds",
        "nodeStatusMaxImages",
        "nodeStatusReportFrequency",
        "nodeStatusUpdateFrequency",
        "oomScoreAdj",
        "podCIDR",
        "podLogsDir",
        "podPidsLimit",
        "podsPerCore",
        "port",
        "preloadedImagesVerificationAllowlist",
        "protectKernelDefaults",
        "providerID",
        "qosReserved",
        "readOnlyPort",
        "registerNode",
        "registerWithTaints",
        "registryBurst",
        "registryPullQPS",
        "reservedMemory",
        "reservedSystemCPUs",
        "resolvConf",
        "rotateCertificates",
        "runOnce",
        "runtimeRequestTimeout",
        "seccompDefault",
        "serializeImagePulls",
        "serverTLSBootstrap",
        "showHiddenMetricsForVersion",
        "shutdownGracePeriod",
        "shutdownGracePeriodByPodPriority",
        "shutdownGracePeriodCriticalPods",
        "singleProcessOOMKill",
        "staticPodPath",
        "staticPodURL",
        "staticPodURLHeader",
        "streamingConnectionIdleTimeout",
        "syncFrequency",
        "systemCgroups",
        "systemReserved",
        "systemReservedCgroup",
        "tlsCertFile",
        "tlsCipherSuites",
        "tlsCurvePreferences",
        "tlsMinVersion",
        "tlsPrivateKeyFile",
        "topologyManagerPolicy",
        "topologyManagerPolicyOptions",
        "topologyManagerScope",
        "tracing",
        "userNamespaces",
        "volumePluginDir",
        "volumeStatsAggPeriod",
    ];

    #[test]
    fn field_names_match_upstream() {
        let mut ours: Vec<&str> = RawKubeletConfiguration::FIELD_NAMES.to_vec();
        ours.sort_unstable();
        let before = ours.len();
        ours.dedup();
        assert_eq!(before, ours.len(), "duplicate field names");
        assert_eq!(ours, UPSTREAM_FIELDS);
    }
}
