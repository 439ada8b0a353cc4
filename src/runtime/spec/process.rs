//! The container process: arguments (`command`/`args` against the image entrypoint), working
//! directory, user and groups (resolved later by [`super::resolve_user`]) and stop signal.

use super::super::user::UserRequest;
use super::env::expand;
use super::invalid;
use super::Ctx;
use super::SpecError;
use k8s_openapi::api::core::v1::SecurityContext;
use std::collections::HashMap;
use std::path::PathBuf;

pub(super) fn process_args(
    ctx: &Ctx<'_>,
    image: Option<&oci_spec::image::Config>,
    env: &[(String, String)],
) -> Result<Vec<String>, SpecError> {
    let map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let exp = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter()
            .flatten()
            .map(|s| expand(s, |n| map.get(n).map(|v| v.to_string())))
            .collect()
    };
    let command = exp(&ctx.container.command);
    let args = exp(&ctx.container.args);
    let image_entrypoint = image
        .and_then(|c| c.entrypoint().clone())
        .unwrap_or_default();
    // Docker writes ENTRYPOINT [""] for "no entrypoint"; containerd treats it so.
    let image_entrypoint = if image_entrypoint.len() == 1 && image_entrypoint[0].is_empty() {
        Vec::new()
    } else {
        image_entrypoint
    };
    let image_cmd = image.and_then(|c| c.cmd().clone()).unwrap_or_default();
    let argv = match (command.is_empty(), args.is_empty()) {
        (true, true) => [image_entrypoint, image_cmd].concat(),
        (false, true) => command,
        (true, false) => [image_entrypoint, args].concat(),
        (false, false) => [command, args].concat(),
    };
    if argv.is_empty() || argv[0].is_empty() {
        return Err(SpecError::EmptyCommand {
            container: ctx.container.name.clone(),
        });
    }
    Ok(argv)
}

pub(super) fn working_dir(
    ctx: &Ctx<'_>,
    image: Option<&oci_spec::image::Config>,
) -> Result<PathBuf, SpecError> {
    if let Some(wd) = ctx
        .container
        .working_dir
        .as_deref()
        .filter(|w| !w.is_empty())
    {
        if !wd.starts_with('/') {
            return Err(invalid(
                ctx.field("workingDir"),
                wd,
                "must be an absolute path",
            ));
        }
        return Ok(PathBuf::from(wd));
    }
    match image
        .and_then(|c| c.working_dir().as_deref())
        .filter(|w| !w.is_empty())
    {
        Some(wd) if wd.starts_with('/') => Ok(PathBuf::from(wd)),
        Some(wd) => Err(invalid(
            "image config WorkingDir".into(),
            wd,
            "must be an absolute path",
        )),
        None => Ok(PathBuf::from("/")),
    }
}

pub(super) fn id_field(value: i64, field: String) -> Result<u32, SpecError> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .ok_or_else(|| invalid(field, value.to_string(), "must be between 0 and 2147483647"))
}

/// The securityContext setting of the container, else of the pod, with its field path.
pub(super) fn sc_setting<T: Clone>(
    ctx: &Ctx<'_>,
    name: &str,
    container: impl Fn(&SecurityContext) -> Option<T>,
    pod: impl Fn(&k8s_openapi::api::core::v1::PodSecurityContext) -> Option<T>,
) -> Option<(T, String)> {
    if let Some(v) = ctx.sc().and_then(&container) {
        return Some((v, ctx.field(&format!("securityContext.{name}"))));
    }
    ctx.spec
        .security_context
        .as_ref()
        .and_then(pod)
        .map(|v| (v, format!("spec.securityContext.{name}")))
}

pub(super) fn user_request(
    ctx: &Ctx<'_>,
    image: Option<&oci_spec::image::Config>,
) -> Result<UserRequest, SpecError> {
    let run_as_user = sc_setting(ctx, "runAsUser", |s| s.run_as_user, |p| p.run_as_user)
        .map(|(v, f)| id_field(v, f))
        .transpose()?;
    let run_as_group = sc_setting(ctx, "runAsGroup", |s| s.run_as_group, |p| p.run_as_group)
        .map(|(v, f)| id_field(v, f))
        .transpose()?;
    let run_as_non_root = sc_setting(
        ctx,
        "runAsNonRoot",
        |s| s.run_as_non_root,
        |p| p.run_as_non_root,
    )
    .is_some_and(|(v, _)| v);
    let psc = ctx.spec.security_context.as_ref();
    let mut supplemental_groups = Vec::new();
    if let Some(fs_group) = psc.and_then(|p| p.fs_group) {
        supplemental_groups.push(id_field(fs_group, "spec.securityContext.fsGroup".into())?);
    }
    for (i, g) in psc
        .and_then(|p| p.supplemental_groups.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        supplemental_groups.push(id_field(
            *g,
            format!("spec.securityContext.supplementalGroups[{i}]"),
        )?);
    }
    let strict_supplemental_groups = match psc.and_then(|p| p.supplemental_groups_policy.as_deref())
    {
        None | Some("Merge") => false,
        Some("Strict") => true,
        Some(other) => {
            return Err(invalid(
                "spec.securityContext.supplementalGroupsPolicy".into(),
                other,
                "must be Merge or Strict",
            ))
        }
    };
    let mut req = UserRequest {
        uid: None,
        user_name: None,
        gid: run_as_group,
        group_name: None,
        supplemental_groups,
        run_as_non_root,
        strict_supplemental_groups,
    };
    let container = ctx.container.name.clone();
    if let Some(uid) = run_as_user {
        if run_as_non_root && uid == 0 {
            return Err(SpecError::RunAsNonRoot {
                container,
                reason: "runAsUser breaks non-root policy".into(),
            });
        }
        req.uid = Some(uid);
        return Ok(req);
    }
    let image_user = image.and_then(|c| c.user().as_deref()).unwrap_or("");
    let (user_part, group_part) = match image_user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (image_user, None),
    };
    let field = || "image config User".to_string();
    if user_part.is_empty() && group_part.is_some() {
        return Err(invalid(field(), image_user, "a group needs a user"));
    }
    match user_part.parse::<u32>() {
        Ok(uid) => req.uid = Some(uid),
        Err(_) if user_part.is_empty() => {}
        Err(_) => req.user_name = Some(user_part.to_string()),
    }
    if run_as_non_root {
        if let Some(name) = &req.user_name {
            return Err(SpecError::RunAsNonRoot {
                container,
                reason: format!(
                    "runAsNonRoot and image has non-numeric user ({name}), cannot verify user is non-root"
                ),
            });
        }
        if req.uid.unwrap_or(0) == 0 {
            return Err(SpecError::RunAsNonRoot {
                container,
                reason: "runAsNonRoot and image will run as root".into(),
            });
        }
    }
    if req.gid.is_none() {
        match group_part {
            None => {}
            Some("") => return Err(invalid(field(), image_user, "empty group")),
            Some(g) => match g.parse::<u32>() {
                Ok(gid) => req.gid = Some(gid),
                Err(_) => req.group_name = Some(g.to_string()),
            },
        }
    }
    Ok(req)
}

/// Parses "SIGTERM", "TERM", "sigterm", "15", "SIGRTMIN+3".
pub fn parse_signal(s: &str) -> Option<i32> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i32>() {
        return (1..=libc::SIGRTMAX()).contains(&n).then_some(n);
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let rt = |base: i32, off: &str, sign: i32| -> Option<i32> {
        let off: i32 = if off.is_empty() { 0 } else { off.parse().ok()? };
        let n = base + sign * off;
        (libc::SIGRTMIN()..=libc::SIGRTMAX())
            .contains(&n)
            .then_some(n)
    };
    if let Some(off) = name.strip_prefix("RTMIN") {
        return rt(libc::SIGRTMIN(), off.strip_prefix('+').unwrap_or(off), 1);
    }
    if let Some(off) = name.strip_prefix("RTMAX") {
        return rt(libc::SIGRTMAX(), off.strip_prefix('-').unwrap_or(off), -1);
    }
    format!("SIG{name}")
        .parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|sig| sig as i32)
}

pub(super) fn stop_signal(
    ctx: &Ctx<'_>,
    image: Option<&oci_spec::image::Config>,
) -> Result<i32, SpecError> {
    if let Some(s) = ctx
        .container
        .lifecycle
        .as_ref()
        .and_then(|l| l.stop_signal.as_deref())
    {
        return parse_signal(s)
            .ok_or_else(|| invalid(ctx.field("lifecycle.stopSignal"), s, "unknown signal"));
    }
    match image.and_then(|c| c.stop_signal().as_deref()) {
        None | Some("") => Ok(libc::SIGTERM),
        Some(s) => parse_signal(s)
            .ok_or_else(|| invalid("image config StopSignal".into(), s, "unknown signal")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::user::resolve_user;
    use super::super::testutil::*;
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use oci_spec::image::ImageConfiguration;
    use serde_json::json;

    // ---- command / args (one test per row of the Kubernetes docs table) ----

    #[test]
    fn command_args_neither_uses_image_entrypoint_and_cmd() {
        assert_eq!(
            args(&ok(&pod_with(json!({}), json!({})))),
            strs(&["/bin/app", "--serve"])
        );
    }

    #[test]
    fn command_args_command_only_ignores_image_entrypoint_and_cmd() {
        let p = pod_with(json!({"command": ["/bin/other", "-x"]}), json!({}));
        assert_eq!(args(&ok(&p)), strs(&["/bin/other", "-x"]));
    }

    #[test]
    fn command_args_args_only_uses_image_entrypoint() {
        let p = pod_with(json!({"args": ["--debug"]}), json!({}));
        assert_eq!(args(&ok(&p)), strs(&["/bin/app", "--debug"]));
    }

    #[test]
    fn command_args_both_use_manifest() {
        let p = pod_with(
            json!({"command": ["/bin/sh"], "args": ["-c", "echo"]}),
            json!({}),
        );
        assert_eq!(args(&ok(&p)), strs(&["/bin/sh", "-c", "echo"]));
    }

    #[test]
    fn empty_command_is_an_error_naming_the_container() {
        let p = pod_with(json!({}), json!({}));
        let e = build_with(&p, &image(json!({"Entrypoint": [""]})), &sandbox(false))
            .expect_err("no command");
        assert_eq!(
            e.to_string(),
            "container \"c\" has no command: neither the manifest nor the image sets one"
        );
        // ENTRYPOINT [""] means "none": the Cmd alone runs.
        let cs = build_with(
            &p,
            &image(json!({"Entrypoint": [""], "Cmd": ["sh"]})),
            &sandbox(false),
        )
        .expect("cmd only");
        assert_eq!(args(&cs), strs(&["sh"]));
    }

    // ---- working directory ----

    #[test]
    fn working_dir_container_then_image_then_root() {
        let img = image(json!({"Entrypoint": ["/a"], "WorkingDir": "/srv"}));
        let cwd = |p: &Pod, i: &ImageConfiguration| {
            process(&build_with(p, i, &sandbox(false)).expect("build"))
                .cwd()
                .clone()
        };
        let plain = pod_with(json!({}), json!({}));
        assert_eq!(cwd(&plain, &img), PathBuf::from("/srv"));
        assert_eq!(
            cwd(&plain, &image(json!({"Entrypoint": ["/a"]}))),
            PathBuf::from("/")
        );
        let set = pod_with(json!({"workingDir": "/work"}), json!({}));
        assert_eq!(cwd(&set, &img), PathBuf::from("/work"));
        let rel = pod_with(json!({"workingDir": "work"}), json!({}));
        assert!(err(&rel).starts_with("spec.containers[0].workingDir: invalid value \"work\""));
    }

    // ---- user ----

    fn user_of(
        container: serde_json::Value,
        pod_sc: serde_json::Value,
        image_user: &str,
    ) -> Result<UserRequest, SpecError> {
        let p = pod_with(container, json!({"securityContext": pod_sc}));
        let img = image(json!({"Entrypoint": ["/a"], "User": image_user}));
        build_with(&p, &img, &sandbox(false)).map(|cs| cs.user)
    }

    #[test]
    fn security_context_user_overrides_image_and_container_overrides_pod() {
        let u = user_of(
            json!({"securityContext": {"runAsUser": 1000}}),
            json!({"runAsUser": 2000, "runAsGroup": 3000, "fsGroup": 4000, "supplementalGroups": [5000, 6000]}),
            "app:staff",
        )
        .expect("user");
        assert_eq!(
            u,
            UserRequest {
                uid: Some(1000),
                user_name: None,
                gid: Some(3000),
                group_name: None,
                supplemental_groups: vec![4000, 5000, 6000],
                run_as_non_root: false,
                strict_supplemental_groups: false,
            }
        );
    }

    #[test]
    fn image_user_forms() {
        let cases = [
            ("", None, None, None, None),
            ("1000", Some(1000), None, None, None),
            ("1000:50", Some(1000), None, Some(50), None),
            ("app", None, Some("app"), None, None),
            ("app:staff", None, Some("app"), None, Some("staff")),
            ("1000:staff", Some(1000), None, None, Some("staff")),
            ("app:50", None, Some("app"), Some(50), None),
        ];
        for (img_user, uid, name, gid, group) in cases {
            let u = user_of(json!({}), json!({}), img_user).expect(img_user);
            assert_eq!(
                (
                    u.uid,
                    u.user_name.as_deref(),
                    u.gid,
                    u.group_name.as_deref()
                ),
                (uid, name, gid, group),
                "image user {img_user:?}"
            );
        }
        // runAsGroup replaces the image group but keeps the image user.
        let u = user_of(
            json!({"securityContext": {"runAsGroup": 7}}),
            json!({}),
            "app:staff",
        )
        .expect("group");
        assert_eq!(
            (u.user_name.as_deref(), u.gid, u.group_name),
            (Some("app"), Some(7), None)
        );
        let bad = user_of(json!({}), json!({}), ":50").expect_err("no user");
        assert!(bad
            .to_string()
            .starts_with("image config User: invalid value \":50\""));
    }

    #[test]
    fn run_as_non_root_follows_kubelet_checks() {
        let non_root = json!({"runAsNonRoot": true});
        let e = user_of(
            json!({"securityContext": {"runAsUser": 0}}),
            non_root.clone(),
            "1000",
        )
        .expect_err("uid 0");
        assert_eq!(
            e.to_string(),
            "container \"c\": runAsUser breaks non-root policy"
        );
        let e = user_of(json!({}), non_root.clone(), "").expect_err("image root");
        assert_eq!(
            e.to_string(),
            "container \"c\": runAsNonRoot and image will run as root"
        );
        let e = user_of(json!({}), non_root.clone(), "0:0").expect_err("image uid 0");
        assert!(e.to_string().ends_with("image will run as root"));
        let e = user_of(json!({}), non_root.clone(), "app").expect_err("name");
        assert!(e.to_string().contains("non-numeric user (app)"), "{e}");
        let u = user_of(json!({}), non_root.clone(), "1000").expect("numeric non-root");
        assert!(u.run_as_non_root);
        // The container can switch the pod setting off.
        let u = user_of(
            json!({"securityContext": {"runAsNonRoot": false}}),
            non_root,
            "",
        )
        .expect("off");
        assert!(!u.run_as_non_root);
        let e = user_of(json!({"securityContext": {"runAsUser": -1}}), json!({}), "")
            .expect_err("negative");
        assert!(e
            .to_string()
            .starts_with("spec.containers[0].securityContext.runAsUser: invalid value \"-1\""));
    }

    #[test]
    fn strict_supplemental_groups_policy() {
        let u = user_of(
            json!({}),
            json!({"supplementalGroupsPolicy": "Strict"}),
            "1",
        )
        .expect("strict");
        assert!(u.strict_supplemental_groups);
        let e =
            user_of(json!({}), json!({"supplementalGroupsPolicy": "Loose"}), "1").expect_err("bad");
        assert!(e
            .to_string()
            .starts_with("spec.securityContext.supplementalGroupsPolicy"));
    }

    #[test]
    fn build_then_resolve_user_against_rootfs() {
        let root = tempfile::tempdir().expect("rootfs");
        std::fs::create_dir(root.path().join("etc")).expect("etc");
        std::fs::write(
            root.path().join("etc/passwd"),
            "app:x:1000:1000::/:/bin/sh\n",
        )
        .expect("passwd");
        std::fs::write(root.path().join("etc/group"), "tools:x:20:app\n").expect("group");
        let u = user_of(json!({}), json!({"fsGroup": 30}), "app").expect("user");
        let resolved = resolve_user(root.path(), &u).expect("resolve");
        assert_eq!((resolved.uid(), resolved.gid()), (1000, 1000));
        assert_eq!(resolved.additional_gids().clone(), Some(vec![1000, 20, 30]));
    }

    #[test]
    fn stop_signal_from_lifecycle_image_or_default() {
        for (s, want) in [
            ("SIGTERM", libc::SIGTERM),
            ("TERM", libc::SIGTERM),
            ("15", 15),
            ("sigquit", libc::SIGQUIT),
            ("SIGRTMIN+3", libc::SIGRTMIN() + 3),
            ("RTMAX", libc::SIGRTMAX()),
        ] {
            assert_eq!(parse_signal(s), Some(want), "{s}");
        }
        for bad in ["SIGNOPE", "0", "99", "", "RTMIN+99"] {
            assert_eq!(parse_signal(bad), None, "{bad}");
        }
        let p = pod_with(json!({}), json!({}));
        let cs = build_with(
            &p,
            &image(json!({"Cmd": ["x"], "StopSignal": "SIGQUIT"})),
            &sandbox(false),
        )
        .expect("build");
        assert_eq!(cs.stop_signal, libc::SIGQUIT);
        let p = pod_with(json!({"lifecycle": {"stopSignal": "SIGUSR1"}}), json!({}));
        let cs = build_with(
            &p,
            &image(json!({"Cmd": ["x"], "StopSignal": "SIGQUIT"})),
            &sandbox(false),
        )
        .expect("build");
        assert_eq!(cs.stop_signal, libc::SIGUSR1);
        let e = build_with(
            &pod_with(json!({}), json!({})),
            &image(json!({"Cmd": ["x"], "StopSignal": "SIGFOO"})),
            &sandbox(false),
        )
        .expect_err("bad signal");
        assert_eq!(
            e.to_string(),
            "image config StopSignal: invalid value \"SIGFOO\": unknown signal"
        );
    }
}
