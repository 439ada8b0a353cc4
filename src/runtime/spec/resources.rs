//! Container cgroup resources: CPU shares, quota and period, memory limit and the QoS
//! oom_score_adj, converted as the kubelet does.

use super::invalid;
use super::Ctx;
use super::SpecError;
use crate::cgroups::resources as cgroup_resources;
use crate::pod::quantity::parse_bytes;
use crate::pod::quantity::parse_cpu_millis;
use crate::pod::quantity::QuantityError;
use crate::pod::resources::effective_requests;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use oci_spec::runtime::LinuxCpu;
use oci_spec::runtime::LinuxMemory;
use oci_spec::runtime::LinuxResources;
use std::collections::BTreeMap;

pub(super) fn resources(ctx: &Ctx<'_>, privileged: bool) -> Result<LinuxResources, SpecError> {
    let r = ctx.container.resources.as_ref();
    let requests = effective_requests(r);
    let limits = r.and_then(|r| r.limits.clone()).unwrap_or_default();
    let get = |list: &BTreeMap<String, Quantity>,
               name: &str,
               kind: &str,
               f: fn(&Quantity) -> Result<u64, QuantityError>|
     -> Result<u64, SpecError> {
        list.get(name)
            .map(|q| {
                f(q).map_err(|source| SpecError::Quantity {
                    field: ctx.field(&format!("resources.{kind}.{name}")),
                    source,
                })
            })
            .transpose()
            .map(Option::unwrap_or_default)
    };
    let cpu_request = get(&requests, "cpu", "requests", parse_cpu_millis)?;
    let cpu_limit = get(&limits, "cpu", "limits", parse_cpu_millis)?;
    let memory_limit = get(&limits, "memory", "limits", parse_bytes)?;

    let share_millis = if cpu_request == 0 && cpu_limit != 0 {
        cpu_limit
    } else {
        cpu_request
    };
    // The kubelet's calculateLinuxResources: shares from the request (or the limit when only
    // a limit is set), the CFS quota from the limit.
    let shares = cgroup_resources::milli_cpu_to_shares(share_millis);
    let mut cpu = LinuxCpu::default();
    cpu.set_shares(Some(shares));
    if cpu_limit != 0 {
        let quota =
            cgroup_resources::milli_cpu_to_quota(cpu_limit, cgroup_resources::CPU_PERIOD_US);
        cpu.set_quota(Some(i64::try_from(quota).unwrap_or(i64::MAX)));
        cpu.set_period(Some(cgroup_resources::CPU_PERIOD_US));
    }
    let mut res = LinuxResources::default();
    res.set_devices(Some(crate::security::devices::cgroup_rules(privileged)));
    res.set_cpu(Some(cpu));
    if memory_limit != 0 {
        let limit = i64::try_from(memory_limit).map_err(|_| {
            invalid(
                ctx.field("resources.limits.memory"),
                memory_limit.to_string(),
                "too large",
            )
        })?;
        let mut memory = LinuxMemory::default();
        memory.set_limit(Some(limit));
        res.set_memory(Some(memory));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::super::build_spec;
    use super::super::testutil::*;
    use super::super::SubPaths;
    use crate::runtime::spec::SpecRequest;
    use crate::security::NodeSecurity;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;
    use std::path::Path;

    // ---- resources ----

    /// cpu shares, cpu quota, cpu period, memory limit, oom_score_adj.
    type Limits = (
        Option<u64>,
        Option<i64>,
        Option<u64>,
        Option<i64>,
        Option<i32>,
    );

    fn cpu_mem(p: &Pod) -> Limits {
        let cs = ok(p);
        let r = linux(&cs).resources().clone().expect("res");
        let cpu = r.cpu().clone().expect("cpu");
        (
            cpu.shares(),
            cpu.quota(),
            cpu.period(),
            r.memory().and_then(|m| m.limit()),
            process(&cs).oom_score_adj(),
        )
    }

    #[test]
    fn resources_follow_kubelet_conversions() {
        let with = |r: serde_json::Value| pod_with(json!({"resources": r}), json!({}));
        // Guaranteed: request defaults to limit.
        assert_eq!(
            cpu_mem(&with(json!({"limits": {"cpu": "500m", "memory": "256Mi"}}))),
            (
                Some(512),
                Some(50_000),
                Some(100_000),
                Some(256 << 20),
                Some(-997)
            )
        );
        // Tiny limit: quota floor 1000, shares floor 2.
        assert_eq!(
            cpu_mem(&with(json!({"limits": {"cpu": "1m"}}))),
            (Some(2), Some(1000), Some(100_000), None, Some(999))
        );
        // Request only: shares, no quota; burstable oom score from memory request.
        assert_eq!(
            cpu_mem(&with(json!({"requests": {"cpu": "2", "memory": "1Gi"}}))),
            (Some(2048), None, None, None, Some(750))
        );
        // Nothing: BestEffort.
        assert_eq!(
            cpu_mem(&with(json!({}))),
            (Some(2), None, None, None, Some(1000))
        );
        // Explicit zero request with a limit: shares come from the limit.
        assert_eq!(
            cpu_mem(&with(
                json!({"requests": {"cpu": "0"}, "limits": {"cpu": "1"}})
            ))
            .0,
            Some(1024)
        );
        let bad = with(json!({"limits": {"memory": "1Zi"}}));
        assert!(err(&bad).contains("resources"), "{}", err(&bad));
    }

    #[test]
    fn critical_pods_get_guaranteed_oom_score() {
        let p = pod_with(json!({}), json!({}));
        let img = image(json!({"Cmd": ["x"]}));
        let sb = sandbox(false);
        let n = node();
        let cs = build_spec(&SpecRequest {
            pod: &p,
            container: &p.spec.as_ref().expect("spec").containers[0],
            image: &img,
            rootfs: Path::new("/r"),
            sandbox: &sb,
            cgroups_path: "/x",
            node: &n,
            critical: true,
            security: &NodeSecurity::default(),
            host_devices: &[],
            sub_paths: SubPaths::Open,
        })
        .expect("build");
        assert_eq!(process(&cs).oom_score_adj(), Some(-997));
    }
}
