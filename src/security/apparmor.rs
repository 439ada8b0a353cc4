//! apparmor: the AppArmor profile a container runs under, as the kubelet
//! (pkg/security/apparmor) and containerd's CRI plugin decide it, and podvisor's default
//! profile.
//!
//! - The profile: the container's `securityContext.appArmorProfile`, else the pod's, else the
//!   `container.apparmor.security.beta.kubernetes.io/<container>` annotation (`runtime/default`,
//!   `localhost/<name>`, `unconfined`), else `RuntimeDefault`, as containerd applies its
//!   default profile to containers that ask for nothing.
//! - `RuntimeDefault` is [`DEFAULT_PROFILE`], the rules of containerd's
//!   `cri-containerd.apparmor.d` template (deny mount, writes to most of /proc and /sys,
//!   /proc/sysrq-trigger and /proc/kcore, /sys/firmware, powercap and securityfs; signals only
//!   from the host and the container itself; ptrace within the container), compiled and loaded
//!   with `apparmor_parser` (Debian's `apparmor` package): the kernel only takes compiled
//!   policy, so writing the text to securityfs is not an option. Privileged containers get no
//!   default profile; a `Localhost` profile applies to them too (containerd).
//! - `Localhost` names a profile already loaded in the kernel
//!   (`/sys/kernel/security/apparmor/profiles`).
//! - Without AppArmor (module off, or securityfs not mounted) the daemon says so once, runs
//!   containers that ask for nothing without a profile, and refuses `Localhost` and
//!   `RuntimeDefault` at validation, as the kubelet refuses any profile but `Unconfined` there.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod};

use super::{profile_type, ProfileType, Violation};

/// The name podvisor's default profile is loaded under.
pub const DEFAULT_PROFILE: &str = "podvisor-default";

/// The legacy per-container annotation prefix.
pub const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Where the module says whether it is enabled.
const ENABLED_PARAMETER: &str = "/sys/module/apparmor/parameters/enabled";
/// AppArmor's directory in securityfs.
pub const SECURITYFS_DIR: &str = "/sys/kernel/security/apparmor";
/// Where Debian's `apparmor` package installs the policy compiler.
const PARSER_CANDIDATES: &[&str] = &["/sbin/apparmor_parser", "/usr/sbin/apparmor_parser"];
/// The policy directory the profile includes come from.
const POLICY_DIR: &str = "/etc/apparmor.d";

/// The profile a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppArmorChoice {
    Unconfined,
    RuntimeDefault,
    Localhost(String),
}

/// Whether the default profile can be used on an AppArmor host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultProfile {
    Available,
    /// Why not (no apparmor_parser, a parser error).
    Unavailable(String),
}

/// AppArmor on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppArmorHost {
    /// Not usable: why.
    Disabled { reason: String },
    Enabled {
        /// AppArmor's securityfs directory (`profiles` lists the loaded ones).
        securityfs: PathBuf,
        default_profile: DefaultProfile,
    },
}

impl AppArmorHost {
    /// What this host offers, without loading anything: the default profile counts as
    /// available when it is loaded or `apparmor_parser` exists to load it.
    pub fn detect() -> AppArmorHost {
        AppArmorHost::detect_at(Path::new(ENABLED_PARAMETER), Path::new(SECURITYFS_DIR))
    }

    fn detect_at(parameter: &Path, securityfs: &Path) -> AppArmorHost {
        match fs::read_to_string(parameter) {
            Ok(v) if v.starts_with('Y') => {}
            Ok(_) => {
                return AppArmorHost::Disabled {
                    reason: "the apparmor module is disabled".into(),
                }
            }
            Err(_) => {
                return AppArmorHost::Disabled {
                    reason: "the kernel has no apparmor module".into(),
                }
            }
        }
        if !securityfs.join("profiles").exists() {
            return AppArmorHost::Disabled {
                reason: format!(
                    "AppArmor is enabled but securityfs is not mounted ({} is missing)",
                    securityfs.display()
                ),
            };
        }
        let default_profile = match is_loaded(securityfs, DEFAULT_PROFILE) {
            Ok(true) => DefaultProfile::Available,
            _ => match parser() {
                Some(_) => DefaultProfile::Available,
                None => DefaultProfile::Unavailable(no_parser()),
            },
        };
        AppArmorHost::Enabled {
            securityfs: securityfs.to_path_buf(),
            default_profile,
        }
    }

    /// Like [`AppArmorHost::detect`], and loads the default profile now (the daemon and
    /// `play` at start), so that its failure is known before any container.
    pub fn detect_and_load() -> AppArmorHost {
        match AppArmorHost::detect() {
            AppArmorHost::Enabled {
                securityfs,
                default_profile: DefaultProfile::Available,
            } => {
                let default_profile = match ensure_default_profile(&securityfs) {
                    Ok(()) => DefaultProfile::Available,
                    Err(e) => DefaultProfile::Unavailable(e.to_string()),
                };
                AppArmorHost::Enabled {
                    securityfs,
                    default_profile,
                }
            }
            other => other,
        }
    }

    /// The one line the daemon logs about AppArmor at start.
    pub fn describe(&self) -> String {
        match self {
            AppArmorHost::Disabled { reason } => format!(
                "AppArmor: not available ({reason}): containers run without an AppArmor \
                 profile; manifests asking for RuntimeDefault or Localhost profiles are refused"
            ),
            AppArmorHost::Enabled {
                default_profile: DefaultProfile::Available,
                ..
            } => format!(
                "AppArmor: enabled; containers get the {DEFAULT_PROFILE} profile unless they ask \
                 for another (privileged ones get none)"
            ),
            AppArmorHost::Enabled {
                default_profile: DefaultProfile::Unavailable(why),
                ..
            } => format!(
                "AppArmor: enabled, but the {DEFAULT_PROFILE} profile cannot be loaded ({why}): \
                 containers run without a profile unless they name a loaded one (Localhost); \
                 RuntimeDefault is refused"
            ),
        }
    }
}

fn no_parser() -> String {
    format!(
        "apparmor_parser not found in {} (install the apparmor package)",
        PARSER_CANDIDATES.join(" or ")
    )
}

fn parser() -> Option<&'static Path> {
    PARSER_CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
}

/// Errors loading the default profile.
#[derive(Debug, thiserror::Error)]
pub enum AppArmorError {
    #[error("{}", no_parser())]
    NoParser,
    #[error("run {parser}: {source}")]
    Spawn { parser: PathBuf, source: io::Error },
    #[error("{parser} refused the {DEFAULT_PROFILE} profile: {output}")]
    Parser { parser: PathBuf, output: String },
    #[error("read {path}: {source}")]
    Profiles { path: PathBuf, source: io::Error },
}

/// True if `name` is loaded (a line `name (mode)` of `<securityfs>/profiles`).
pub fn is_loaded(securityfs: &Path, name: &str) -> Result<bool, AppArmorError> {
    let path = securityfs.join("profiles");
    let text = fs::read_to_string(&path).map_err(|source| AppArmorError::Profiles {
        path: path.clone(),
        source,
    })?;
    Ok(text
        .lines()
        .any(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(" ("))))
}

/// Loads the default profile unless it is loaded already (containerd checks before every
/// container too: `aa-teardown` or a policy reload may have removed it).
pub fn ensure_default_profile(securityfs: &Path) -> Result<(), AppArmorError> {
    if is_loaded(securityfs, DEFAULT_PROFILE)? {
        return Ok(());
    }
    let parser = parser().ok_or(AppArmorError::NoParser)?;
    let text = default_profile_text(DEFAULT_PROFILE, &own_profile(), |m| {
        Path::new(POLICY_DIR).join(m).exists()
    });
    // -K: no cache; -r: replace; the policy on stdin (no file to protect or leave behind).
    let mut child = Command::new(parser)
        .args(["-K", "-r"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| AppArmorError::Spawn {
            parser: parser.to_path_buf(),
            source,
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A parser that exits early closes the pipe; its output says why.
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|source| AppArmorError::Spawn {
            parser: parser.to_path_buf(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(AppArmorError::Parser {
            parser: parser.to_path_buf(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

/// The profile podvisor itself runs under (`unconfined` normally): containers accept signals
/// from it.
fn own_profile() -> String {
    let current = fs::read_to_string("/proc/self/attr/apparmor/current")
        .or_else(|_| fs::read_to_string("/proc/self/attr/current"))
        .unwrap_or_default();
    match current.split_whitespace().next() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => "unconfined".into(),
    }
}

/// The text of the default profile named `name`. `policy_has` says whether a file exists
/// below /etc/apparmor.d (the ABI and the tunables/abstractions are used when installed).
pub fn default_profile_text(
    name: &str,
    daemon_profile: &str,
    policy_has: impl Fn(&str) -> bool,
) -> String {
    let mut t = String::new();
    if policy_has("abi/3.0") {
        t.push_str("abi <abi/3.0>,\n");
    }
    if policy_has("tunables/global") {
        t.push_str("#include <tunables/global>\n");
    } else {
        t.push_str("@{PROC}=/proc/\n");
    }
    t.push_str(&format!(
        "\nprofile {name} flags=(attach_disconnected,mediate_deleted) {{\n"
    ));
    if policy_has("abstractions/base") {
        t.push_str("  #include <abstractions/base>\n");
    }
    t.push_str(&format!(
        "  network,
  capability,
  file,
  umount,
  # signals from the host (unconfined processes, podvisor itself) and within the container
  signal (receive) peer=unconfined,
  signal (receive) peer={daemon_profile},
  signal (send,receive) peer={name},

  # /proc: no writes outside /proc/<pid>/ and /proc/sys/kernel/shm*
  deny @{{PROC}}/* w,
  deny @{{PROC}}/{{[^1-9/],[^1-9/][^0-9/],[^1-9s/][^0-9y/][^0-9s/],[^1-9/][^0-9/][^0-9/][^0-9/]*}}/** w,
  deny @{{PROC}}/sys/[^k]** w,
  deny @{{PROC}}/sys/kernel/{{?,??,[^s][^h][^m]**}} w,
  deny @{{PROC}}/sysrq-trigger rwklx,
  deny @{{PROC}}/kcore rwklx,

  deny mount,

  # /sys: no writes outside /sys/fs/cgroup; firmware, powercap and securityfs hidden
  deny /sys/[^f]*/** wklx,
  deny /sys/f[^s]*/** wklx,
  deny /sys/fs/[^c]*/** wklx,
  deny /sys/fs/c[^g]*/** wklx,
  deny /sys/fs/cg[^r]*/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/devices/virtual/powercap/** rwklx,
  deny /sys/kernel/security/** rwklx,

  # processes of the container may trace each other (if ptrace is otherwise allowed)
  ptrace (trace,tracedby,read,readby) peer={name},
}}
"
    ));
    t
}

/// The profile a container asks for and the field it comes from (`None`: nothing asked).
pub fn choice(
    pod: &Pod,
    container: &Container,
    container_path: &str,
) -> Result<(AppArmorChoice, Option<String>), Violation> {
    let field_of =
        |p: &AppArmorProfile, field: String| parse_field(p, &field).map(|c| (c, Some(field)));
    if let Some(p) = container
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
    {
        return field_of(
            p,
            format!("{container_path}.securityContext.appArmorProfile"),
        );
    }
    if let Some(p) = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.app_armor_profile.as_ref())
    {
        return field_of(p, "spec.securityContext.appArmorProfile".into());
    }
    let key = format!("{ANNOTATION_PREFIX}{}", container.name);
    if let Some(v) = pod.metadata.annotations.as_ref().and_then(|a| a.get(&key)) {
        let field = format!("metadata.annotations[{key}]");
        let c = match v.as_str() {
            "runtime/default" => AppArmorChoice::RuntimeDefault,
            "unconfined" => AppArmorChoice::Unconfined,
            other => match other.strip_prefix("localhost/") {
                Some(name) => AppArmorChoice::Localhost(check_name(name, &field)?),
                None => {
                    return Err(Violation::new(
                        field,
                        format!(
                            "{v:?} is not one of runtime/default, unconfined, localhost/<profile>"
                        ),
                    ))
                }
            },
        };
        return Ok((c, Some(field)));
    }
    Ok((AppArmorChoice::RuntimeDefault, None))
}

fn parse_field(p: &AppArmorProfile, field: &str) -> Result<AppArmorChoice, Violation> {
    match profile_type(&p.type_, p.localhost_profile.as_deref(), field)? {
        ProfileType::Unconfined => Ok(AppArmorChoice::Unconfined),
        ProfileType::RuntimeDefault => Ok(AppArmorChoice::RuntimeDefault),
        ProfileType::Localhost(name) => Ok(AppArmorChoice::Localhost(check_name(
            name.unwrap_or(""),
            &format!("{field}.localhostProfile"),
        )?)),
    }
}

fn check_name(name: &str, field: &str) -> Result<String, Violation> {
    if name.trim().is_empty() {
        return Err(Violation::new(
            field,
            "required when type is Localhost (the name of a loaded AppArmor profile)",
        ));
    }
    if name.len() > 4095 || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Violation::new(
            field,
            format!("{name:?} is not an AppArmor profile name (no spaces or control characters, at most 4095 bytes)"),
        ));
    }
    Ok(name.to_string())
}

/// The profile name the container runs under (`None`: unconfined), or why it cannot run on
/// this host.
pub fn resolve(
    choice: &AppArmorChoice,
    field: Option<&str>,
    privileged: bool,
    host: &AppArmorHost,
) -> Result<Option<String>, Violation> {
    let refuse = |message: String| {
        Violation::new(
            field
                .unwrap_or("securityContext.appArmorProfile")
                .to_string(),
            message,
        )
    };
    match (choice, host) {
        (AppArmorChoice::Unconfined, _) => Ok(None),
        (AppArmorChoice::RuntimeDefault, _) if privileged => Ok(None),
        // Nothing asked for: the default where there is one.
        (AppArmorChoice::RuntimeDefault, AppArmorHost::Disabled { .. }) if field.is_none() => {
            Ok(None)
        }
        (
            AppArmorChoice::RuntimeDefault,
            AppArmorHost::Enabled {
                default_profile: DefaultProfile::Unavailable(_),
                ..
            },
        ) if field.is_none() => Ok(None),
        (_, AppArmorHost::Disabled { reason }) => Err(refuse(format!(
            "AppArmor is not available on this host ({reason})"
        ))),
        (
            AppArmorChoice::RuntimeDefault,
            AppArmorHost::Enabled {
                default_profile: DefaultProfile::Available,
                ..
            },
        ) => Ok(Some(DEFAULT_PROFILE.to_string())),
        (
            AppArmorChoice::RuntimeDefault,
            AppArmorHost::Enabled {
                default_profile: DefaultProfile::Unavailable(why),
                ..
            },
        ) => Err(refuse(format!(
            "the default AppArmor profile cannot be loaded: {why}"
        ))),
        (AppArmorChoice::Localhost(name), AppArmorHost::Enabled { securityfs, .. }) => {
            match is_loaded(securityfs, name) {
                Ok(true) => Ok(Some(name.clone())),
                Ok(false) => Err(refuse(format!(
                    "AppArmor profile {name:?} is not loaded (load it with apparmor_parser first)"
                ))),
                Err(e) => Err(refuse(e.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_with(profiles: &str) -> (tempfile::TempDir, AppArmorHost) {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("profiles"), profiles).expect("write");
        let host = AppArmorHost::Enabled {
            securityfs: dir.path().to_path_buf(),
            default_profile: DefaultProfile::Available,
        };
        (dir, host)
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn detection_needs_the_module_and_securityfs() {
        let d = tempfile::tempdir().expect("tempdir");
        let param = d.path().join("enabled");
        let sfs = d.path().join("apparmor");
        assert!(matches!(
            AppArmorHost::detect_at(&param, &sfs),
            AppArmorHost::Disabled { .. }
        ));
        fs::write(&param, "N\n").expect("write");
        assert!(matches!(
            AppArmorHost::detect_at(&param, &sfs),
            AppArmorHost::Disabled { reason } if reason.contains("disabled")
        ));
        fs::write(&param, "Y\n").expect("write");
        assert!(matches!(
            AppArmorHost::detect_at(&param, &sfs),
            AppArmorHost::Disabled { reason } if reason.contains("securityfs")
        ));
        fs::create_dir(&sfs).expect("mkdir");
        fs::write(
            sfs.join("profiles"),
            format!("{DEFAULT_PROFILE} (enforce)\n"),
        )
        .expect("write");
        assert_eq!(
            AppArmorHost::detect_at(&param, &sfs),
            AppArmorHost::Enabled {
                securityfs: sfs.clone(),
                default_profile: DefaultProfile::Available
            }
        );
    }

    #[test]
    fn loaded_profiles_are_matched_by_whole_name() {
        let (d, _) = host_with("docker-default (enforce)\nnginx-strict (complain)\n");
        assert!(is_loaded(d.path(), "nginx-strict").expect("read"));
        assert!(!is_loaded(d.path(), "nginx").expect("read"));
        assert!(!is_loaded(d.path(), "docker").expect("read"));
    }

    #[test]
    fn choice_follows_container_pod_annotation_then_default() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p", "annotations": {
                "container.apparmor.security.beta.kubernetes.io/b": "localhost/legacy",
                "container.apparmor.security.beta.kubernetes.io/c": "runtime/strict"}},
            "spec": {"containers": [
                {"name": "a", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
                {"name": "b"}, {"name": "c"}, {"name": "d"}]}
        }));
        let spec = p.spec.clone().expect("spec");
        let c = |i: usize| choice(&p, &spec.containers[i], &format!("spec.containers[{i}]"));
        assert_eq!(c(0).expect("a").0, AppArmorChoice::Unconfined);
        assert_eq!(
            c(1).expect("b").0,
            AppArmorChoice::Localhost("legacy".into())
        );
        let e = c(2).expect_err("bad annotation");
        assert_eq!(
            e.field,
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]"
        );
        assert_eq!(c(3).expect("d"), (AppArmorChoice::RuntimeDefault, None));
        let bad = pod(serde_json::json!({"metadata": {"name": "p"}, "spec": {
            "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": " "}},
            "containers": [{"name": "a"}]}}));
        let e = choice(
            &bad,
            &bad.spec.clone().expect("spec").containers[0],
            "spec.containers[0]",
        )
        .expect_err("empty name");
        assert_eq!(
            e.field,
            "spec.securityContext.appArmorProfile.localhostProfile"
        );
    }

    #[test]
    fn resolution_against_the_host() {
        let (_d, host) = host_with(&format!("{DEFAULT_PROFILE} (enforce)\nmine (enforce)\n"));
        let f = Some("spec.containers[0].securityContext.appArmorProfile");
        let rd = AppArmorChoice::RuntimeDefault;
        assert_eq!(
            resolve(&rd, None, false, &host),
            Ok(Some(DEFAULT_PROFILE.into()))
        );
        assert_eq!(resolve(&rd, None, true, &host), Ok(None));
        let mine = AppArmorChoice::Localhost("mine".into());
        assert_eq!(resolve(&mine, f, true, &host), Ok(Some("mine".into())));
        let e = resolve(&AppArmorChoice::Localhost("theirs".into()), f, false, &host)
            .expect_err("not loaded");
        assert!(e.message.contains("not loaded"), "{}", e.message);
        let off = AppArmorHost::Disabled {
            reason: "the kernel has no apparmor module".into(),
        };
        assert_eq!(resolve(&rd, None, false, &off), Ok(None));
        assert_eq!(
            resolve(&AppArmorChoice::Unconfined, f, false, &off),
            Ok(None)
        );
        for c in [rd.clone(), mine.clone()] {
            let e = resolve(&c, f, false, &off).expect_err("no apparmor");
            assert_eq!(Some(e.field.as_str()), f);
            assert!(e.message.contains("not available"), "{}", e.message);
        }
        let no_parser = AppArmorHost::Enabled {
            securityfs: PathBuf::from("/nonexistent"),
            default_profile: DefaultProfile::Unavailable("no parser".into()),
        };
        assert_eq!(resolve(&rd, None, false, &no_parser), Ok(None));
        assert!(resolve(&rd, f, false, &no_parser).is_err());
    }

    #[test]
    fn default_profile_text_has_containerds_rules() {
        let t = default_profile_text("podvisor-default", "unconfined", |m| m == "tunables/global");
        assert!(t.starts_with("#include <tunables/global>\n"), "{t}");
        assert!(
            t.contains("profile podvisor-default flags=(attach_disconnected,mediate_deleted) {")
        );
        for rule in [
            "deny mount,",
            "deny @{PROC}/sysrq-trigger rwklx,",
            "deny /sys/firmware/** rwklx,",
            "deny /sys/kernel/security/** rwklx,",
            "signal (send,receive) peer=podvisor-default,",
            "ptrace (trace,tracedby,read,readby) peer=podvisor-default,",
        ] {
            assert!(t.contains(rule), "{rule}\n{t}");
        }
        assert!(!t.contains("abstractions/base"));
        let bare = default_profile_text("x", "unconfined", |_| false);
        assert!(bare.starts_with("@{PROC}=/proc/\n"), "{bare}");
    }

    #[test]
    fn apparmor_parser_compiles_the_default_profile() {
        let Some(parser) = parser() else {
            eprintln!("skipped: no apparmor_parser (Debian package apparmor)");
            return;
        };
        for with_policy in [true, false] {
            let text = default_profile_text(DEFAULT_PROFILE, "unconfined", |m| {
                with_policy && Path::new(POLICY_DIR).join(m).exists()
            });
            // -Q: compile only, whether or not this kernel has AppArmor.
            let mut child = Command::new(parser)
                .args(["-Q", "-K"])
                .stdin(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn apparmor_parser");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("write profile");
            let out = child.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "{}\n{text}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
