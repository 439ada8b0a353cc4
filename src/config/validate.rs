//! config::validate: phase two of reading a KubeletConfiguration file — each field podvisor
//! implements checked and converted into [`KubeletConfig`], with the field's name and
//! line:column in the error, and the known fields it does not implement listed.

use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_saphyr::{Location, Spanned};

use super::checks::{check_absolute, check_header, check_pod_logs_dir, check_url};
use super::eviction::reservation;
use super::raw::RawKubeletConfiguration;
use super::raw::{fmt_location, non_empty};
use super::{apiserver, eviction, network, server};
use super::{ConfigError, KubeletConfig, IMPLEMENTED_FIELDS};
use crate::duration::parse_go_duration;
use crate::pod::quantity::parse_bytes;
use crate::security::sysctl::SysctlPattern;

/// Phase two: checks the implemented fields and lists the unimplemented ones.
pub(super) fn validate(
    raw: &RawKubeletConfiguration,
    source_name: &str,
) -> Result<KubeletConfig, ConfigError> {
    let err = |field: &str, at: &Location, message: String| ConfigError::Invalid {
        source_name: source_name.into(),
        location: fmt_location(at),
        field: field.into(),
        message,
    };

    let static_pod_path = match non_empty(&raw.static_pod_path) {
        Some(s) => {
            let p = PathBuf::from(&s.value);
            check_absolute(&p).map_err(|m| err("staticPodPath", &s.referenced, m.to_string()))?;
            Some(p)
        }
        None => None,
    };
    let static_pod_url = match non_empty(&raw.static_pod_url) {
        Some(s) => {
            check_url(&s.value).map_err(|m| err("staticPodURL", &s.referenced, m.to_string()))?;
            Some(s.value.clone())
        }
        None => None,
    };
    let static_pod_url_header = match &raw.static_pod_url_header {
        Some(h) => {
            for (name, values) in &h.value {
                check_header(name, values)
                    .map_err(|m| err("staticPodURLHeader", &h.referenced, m.to_string()))?;
            }
            Some(h.value.clone())
        }
        None => None,
    };
    let frequency = |field: &str, v: &Option<Spanned<String>>| -> Result<_, ConfigError> {
        match non_empty(v) {
            Some(s) => {
                let d = parse_go_duration(&s.value)
                    .map_err(|e| err(field, &s.referenced, e.to_string()))?;
                // The kubelet's defaulting treats a zero duration as unset (kubeadm writes "0s").
                Ok((!d.is_zero()).then_some(d))
            }
            None => Ok(None),
        }
    };
    let file_check_frequency = frequency("fileCheckFrequency", &raw.file_check_frequency)?;
    let http_check_frequency = frequency("httpCheckFrequency", &raw.http_check_frequency)?;
    let sync_frequency = frequency("syncFrequency", &raw.sync_frequency)?;

    let container_log_max_size = match non_empty(&raw.container_log_max_size) {
        Some(s) => {
            let bytes = parse_bytes(&Quantity(s.value.clone()))
                .map_err(|e| err("containerLogMaxSize", &s.referenced, e.to_string()))?;
            if bytes == 0 {
                return Err(err(
                    "containerLogMaxSize",
                    &s.referenced,
                    "must be greater than zero".into(),
                ));
            }
            Some(bytes)
        }
        None => None,
    };
    let container_log_max_files = match &raw.container_log_max_files {
        Some(n) if n.value < 2 => {
            return Err(err(
                "containerLogMaxFiles",
                &n.referenced,
                format!("{} must be at least 2", n.value),
            ))
        }
        // The value is at least 2 here, so its absolute value is the value.
        Some(n) => Some(n.value.unsigned_abs()),
        None => None,
    };
    let pod_logs_dir = match non_empty(&raw.pod_logs_dir) {
        Some(s) => {
            check_pod_logs_dir(&s.value)
                .map_err(|m| err("podLogsDir", &s.referenced, m.to_string()))?;
            Some(PathBuf::from(&s.value))
        }
        None => None,
    };
    let cgroup_driver = match non_empty(&raw.cgroup_driver) {
        Some(s) => Some(
            crate::cgroups::CgroupDriver::parse(&s.value).ok_or_else(|| {
                err(
                    "cgroupDriver",
                    &s.referenced,
                    format!("{:?} is not a cgroup driver (cgroupfs or systemd)", s.value),
                )
            })?,
        ),
        None => None,
    };
    let cgroup_root = match non_empty(&raw.cgroup_root) {
        Some(s) if cgroup_driver == Some(crate::cgroups::CgroupDriver::Systemd) => {
            crate::cgroups::systemd::validate_slice(&s.value)
                .map_err(|e| err("cgroupRoot", &s.referenced, e.to_string()))?;
            Some(s.value.clone())
        }
        Some(s) => {
            crate::cgroups::validate_parent(&s.value).map_err(|_| {
                err(
                    "cgroupRoot",
                    &s.referenced,
                    format!(
                        "{:?} must name a cgroup below the root, without \".\" or \"..\" \
                         (podvisor places pods in <cgroupRoot>/pod<uid>)",
                        s.value
                    ),
                )
            })?;
            Some(s.value.clone())
        }
        None => None,
    };
    let resolv_conf = match &raw.resolv_conf {
        None => None,
        Some(s) if s.is_empty() => Some(None),
        Some(s) if s.starts_with('/') => Some(Some(PathBuf::from(s))),
        Some(s) => {
            return Err(ConfigError::Invalid {
                source_name: source_name.to_string(),
                location: String::new(),
                field: "resolvConf".into(),
                message: format!("{s:?} must be an absolute path or \"\""),
            })
        }
    };
    let pod_pids_limit = match &raw.pod_pids_limit {
        Some(n) if n.value < -1 => {
            return Err(err(
                "podPidsLimit",
                &n.referenced,
                format!("{} must be -1 (unlimited) or a positive number", n.value),
            ))
        }
        // Like the kubelet, only a positive value sets a limit.
        Some(n) if n.value > 0 => Some(n.value),
        _ => None,
    };

    let percent = |field: &str, v: &Option<Spanned<i32>>| -> Result<Option<u8>, ConfigError> {
        match v {
            Some(n) => u8::try_from(n.value)
                .ok()
                .filter(|p| *p <= 100)
                .map(Some)
                .ok_or_else(|| {
                    err(
                        field,
                        &n.referenced,
                        format!("{} must be between 0 and 100", n.value),
                    )
                }),
            None => Ok(None),
        }
    };
    let image_gc_high_threshold_percent = percent(
        "imageGCHighThresholdPercent",
        &raw.image_gc_high_threshold_percent,
    )?;
    let image_gc_low_threshold_percent = percent(
        "imageGCLowThresholdPercent",
        &raw.image_gc_low_threshold_percent,
    )?;
    let (high, low) = (
        image_gc_high_threshold_percent.unwrap_or(85),
        image_gc_low_threshold_percent.unwrap_or(80),
    );
    // The defaults (85, 80) are in order, so a violation involves a field that is present.
    if let Some(at) = raw
        .image_gc_low_threshold_percent
        .as_ref()
        .or(raw.image_gc_high_threshold_percent.as_ref())
        .filter(|_| low >= high)
    {
        return Err(err(
            "imageGCLowThresholdPercent",
            &at.referenced,
            format!("{low} must be less than imageGCHighThresholdPercent ({high})"),
        ));
    }
    let image_minimum_gc_age = frequency("imageMinimumGCAge", &raw.image_minimum_gc_age)?;
    let eviction = eviction::parse(raw, source_name)?;
    let server = server::parse(raw, source_name)?;
    let network = network::parse(raw, source_name)?;
    let api_server = apiserver::parse(raw, source_name)?;
    let mut reservation = reservation(raw, source_name)?;
    // Node allocatable subtracts the same hard memory.available threshold the eviction
    // manager enforces (with mergeDefaultEvictionSettings, the merged default too).
    reservation.eviction_memory = crate::eviction::threshold::hard_memory(&eviction.thresholds);

    let allowed_unsafe_sysctls = raw
        .allowed_unsafe_sysctls
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, p)| {
            SysctlPattern::parse(&p.value).map_err(|e| {
                err(
                    &format!("allowedUnsafeSysctls[{i}]"),
                    &p.referenced,
                    e.to_string(),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;

    let mut unimplemented_fields: Vec<String> = raw
        .present_fields()
        .into_iter()
        .filter(|f| !IMPLEMENTED_FIELDS.contains(f))
        .map(String::from)
        .chain(server::unimplemented(raw))
        .collect();
    unimplemented_fields.sort_unstable();
    unimplemented_fields.dedup();

    Ok(KubeletConfig {
        static_pod_path,
        static_pod_url,
        static_pod_url_header,
        file_check_frequency,
        http_check_frequency,
        sync_frequency,
        container_log_max_size,
        container_log_max_files,
        pod_logs_dir,
        cgroup_root,
        cgroup_driver,
        pod_pids_limit,
        image_gc_high_threshold_percent,
        image_gc_low_threshold_percent,
        image_minimum_gc_age,
        reservation,
        eviction,
        allowed_unsafe_sysctls,
        seccomp_default: raw.seccomp_default,
        resolv_conf,
        server,
        network,
        api_server,
        unimplemented_fields,
    })
}
