//! OCI / Docker image JSON documents: raw serde types as found in archives (indexes,
//! manifests, configs, docker-archive `manifest.json`), the media types the store knows, and
//! the host platform with its matching rules (amd64, arm64/v8, arm/v7, arm/v6 ...).

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub const MT_OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MT_OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MT_OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MT_DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// Annotation holding the full image name (containerd, Docker 25+ `docker save`).
pub const ANN_CONTAINERD_NAME: &str = "io.containerd.image.name";
/// OCI annotation holding a tag or a full reference.
pub const ANN_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// A content descriptor as written in indexes and manifests.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RawDescriptor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub digest: String,
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<RawPlatform>,
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub annotations: HashMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
pub struct RawPlatform {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl fmt::Display for RawPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// An image index (OCI) or manifest list (Docker).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawIndex {
    pub manifests: Vec<RawDescriptor>,
}

/// An image manifest (OCI or Docker schema 2).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RawManifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: RawDescriptor,
    pub layers: Vec<RawDescriptor>,
}

/// The parts of an image config the store needs.
#[derive(Debug, Clone, Deserialize)]
pub struct RawConfig {
    #[serde(default)]
    pub created: Option<String>,
    pub rootfs: RawRootFs,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawRootFs {
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

/// One entry of a docker-archive `manifest.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawDockerEntry {
    pub config: String,
    #[serde(default)]
    pub repo_tags: Option<Vec<String>>,
    pub layers: Vec<String>,
}

/// Whether a descriptor / document with this media type is an index.
pub fn is_index_media_type(mt: &str) -> bool {
    mt == MT_OCI_INDEX || mt == MT_DOCKER_LIST
}

/// The platform this process runs on, in OCI terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPlatform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl fmt::Display for HostPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// An image index with no entry this host can run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no entry for this platform; the index offers {}", .available.join(", "))]
pub struct NoMatchingPlatform {
    /// The platforms the index offers (`os/arch[/variant]`, or `unknown`).
    pub available: Vec<String>,
}

impl NoMatchingPlatform {
    /// The offered platforms, comma-separated.
    pub fn offered(&self) -> String {
        self.available.join(", ")
    }
}

impl HostPlatform {
    /// Detects the host platform from the compile-time architecture (and /proc/cpuinfo for
    /// 32-bit arm, defaulting to v7).
    pub fn detect() -> HostPlatform {
        let (arch, variant) = match std::env::consts::ARCH {
            "x86_64" => ("amd64", None),
            "x86" => ("386", None),
            "aarch64" => ("arm64", Some("v8".to_string())),
            "arm" => ("arm", Some(arm_variant())),
            "powerpc64" if cfg!(target_endian = "little") => ("ppc64le", None),
            "riscv64" => ("riscv64", None),
            "s390x" => ("s390x", None),
            "loongarch64" => ("loong64", None),
            other => (other, None),
        };
        HostPlatform {
            os: std::env::consts::OS.to_string(),
            architecture: arch.to_string(),
            variant,
        }
    }

    /// How well `p` fits this host: `None` when it cannot run, lower is better.
    /// The entry of an index for this machine: a lone entry without platform as is, else
    /// the best-ranked match; `Err` lists the platforms the index offers.
    pub fn select<'a>(
        &self,
        descs: &'a [RawDescriptor],
    ) -> Result<&'a RawDescriptor, NoMatchingPlatform> {
        if let [only] = descs {
            if only.platform.is_none() {
                return Ok(only);
            }
        }
        descs
            .iter()
            .filter_map(|d| {
                d.platform
                    .as_ref()
                    .and_then(|p| self.rank(p))
                    .map(|r| (r, d))
            })
            .min_by_key(|(r, _)| *r)
            .map(|(_, d)| d)
            .ok_or_else(|| NoMatchingPlatform {
                available: descs
                    .iter()
                    .map(|d| {
                        d.platform
                            .as_ref()
                            .map_or("unknown".to_string(), |p| p.to_string())
                    })
                    .collect(),
            })
    }

    pub fn rank(&self, p: &RawPlatform) -> Option<u32> {
        if p.os != self.os || p.architecture != self.architecture {
            return None;
        }
        let want = self.variant.as_deref();
        let have = p.variant.as_deref().filter(|v| !v.is_empty());
        match (self.architecture.as_str(), want, have) {
            (_, _, None) => Some(1),
            (_, Some(w), Some(h)) if w == h => Some(0),
            ("arm64", _, Some("v8")) => Some(0),
            ("arm", Some(w), Some(h)) => {
                // An armv7 host runs v6 and v5 images too, preferring the closest.
                let w = arm_version(w)?;
                let h = arm_version(h)?;
                (h < w).then(|| 1 + (w - h))
            }
            _ => None,
        }
    }
}

fn arm_version(v: &str) -> Option<u32> {
    v.strip_prefix('v')?.parse().ok()
}

fn arm_variant() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    for line in cpuinfo.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim() == "CPU architecture" {
                match v.trim() {
                    "6" => return "v6".into(),
                    "5" => return "v5".into(),
                    _ => return "v7".into(),
                }
            }
        }
    }
    "v7".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(os: &str, arch: &str, variant: Option<&str>) -> RawPlatform {
        RawPlatform {
            os: os.into(),
            architecture: arch.into(),
            variant: variant.map(Into::into),
        }
    }

    #[test]
    fn platform_ranking() {
        let arm7 = HostPlatform {
            os: "linux".into(),
            architecture: "arm".into(),
            variant: Some("v7".into()),
        };
        assert_eq!(arm7.rank(&p("linux", "arm", Some("v7"))), Some(0));
        assert_eq!(arm7.rank(&p("linux", "arm", Some("v6"))), Some(2));
        assert_eq!(arm7.rank(&p("linux", "arm", Some("v8"))), None);
        assert_eq!(arm7.rank(&p("linux", "arm64", Some("v8"))), None);
        let arm64 = HostPlatform {
            os: "linux".into(),
            architecture: "arm64".into(),
            variant: Some("v8".into()),
        };
        assert_eq!(arm64.rank(&p("linux", "arm64", None)), Some(1));
        assert_eq!(arm64.rank(&p("linux", "arm64", Some("v8"))), Some(0));
        let host = HostPlatform::detect();
        assert_eq!(host.os, "linux");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(host.to_string(), "linux/amd64");
            assert_eq!(host.rank(&p("linux", "amd64", None)), Some(1));
            assert_eq!(host.rank(&p("windows", "amd64", None)), None);
        }
    }
}
