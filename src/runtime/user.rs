//! Container user resolution against the image's own `/etc/passwd` and `/etc/group`, and the
//! safe in-rootfs file opening it relies on.
//!
//! Semantics follow containerd's `oci.WithUser` / `WithAdditionalGIDs` as driven by the CRI
//! plugin: a uid without a gid takes the gid of its passwd entry (0 when there is none); a
//! name must exist in passwd; the additional gids are the primary gid first, then every group
//! whose member list names the user (unless `supplementalGroupsPolicy: Strict`), then the
//! pod's supplemental groups (fsGroup first). Files are opened with `openat2(RESOLVE_IN_ROOT)`
//! relative to the rootfs, so a hostile image whose `etc/passwd` is a symlink to an absolute
//! path (or climbs with `..`) reads the file inside the rootfs, never the host's.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use oci_spec::runtime::User;

use crate::sys::at::{open_root, openat2_in_root};
use rustix::fs::{OFlags, ResolveFlags};

/// What the container asks to run as, before it is resolved against the rootfs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UserRequest {
    /// Numeric uid (securityContext.runAsUser or a numeric image `User`).
    pub uid: Option<u32>,
    /// User name from the image `User`, looked up in `/etc/passwd` (exclusive with `uid`).
    pub user_name: Option<String>,
    /// Numeric gid (securityContext.runAsGroup or the image `User`'s numeric group).
    pub gid: Option<u32>,
    /// Group name from the image `User`, looked up in `/etc/group` (exclusive with `gid`).
    pub group_name: Option<String>,
    /// fsGroup then supplementalGroups from the pod security context.
    pub supplemental_groups: Vec<u32>,
    /// runAsNonRoot: resolving to uid 0 is an error.
    pub run_as_non_root: bool,
    /// supplementalGroupsPolicy: Strict — do not add the groups of `/etc/group` that list the
    /// user.
    pub strict_supplemental_groups: bool,
}

/// Why a user could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("open rootfs {path}")]
    OpenRoot { path: PathBuf, source: io::Error },
    #[error("open {file} in rootfs {rootfs}")]
    OpenInRoot {
        rootfs: PathBuf,
        file: String,
        source: io::Error,
    },
    #[error("{file} in rootfs {rootfs} is not a regular file")]
    NotRegular { rootfs: PathBuf, file: String },
    #[error("read {file} in rootfs {rootfs}")]
    Read {
        rootfs: PathBuf,
        file: String,
        source: io::Error,
    },
    #[error("{file} in rootfs {rootfs} is larger than {limit} bytes")]
    TooLarge {
        rootfs: PathBuf,
        file: String,
        limit: u64,
    },
    #[error("user {user:?} not found in /etc/passwd of rootfs {rootfs}")]
    UserNotFound { user: String, rootfs: PathBuf },
    #[error("group {group:?} not found in /etc/group of rootfs {rootfs}")]
    GroupNotFound { group: String, rootfs: PathBuf },
    #[error("container has runAsNonRoot and user {user:?} resolves to uid 0")]
    RunAsRoot { user: String },
}

/// Largest passwd/group file read (a hostile image could point them at huge files).
const MAX_DB_SIZE: u64 = 16 << 20;

/// Reads a small regular file of the rootfs; `Ok(None)` when it does not exist.
fn read_db(root: &OwnedFd, rootfs: &Path, file: &str) -> Result<Option<String>, UserError> {
    let fd = match openat2_in_root(
        root,
        Path::new(file),
        // O_NONBLOCK: opening a FIFO planted by the image must not hang.
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(UserError::OpenInRoot {
                rootfs: rootfs.to_path_buf(),
                file: file.to_string(),
                source,
            })
        }
    };
    let f = File::from(fd);
    let read_err = |source| UserError::Read {
        rootfs: rootfs.to_path_buf(),
        file: file.to_string(),
        source,
    };
    let meta = f.metadata().map_err(read_err)?;
    let ft = meta.file_type();
    if !ft.is_file() || ft.is_fifo() {
        return Err(UserError::NotRegular {
            rootfs: rootfs.to_path_buf(),
            file: file.to_string(),
        });
    }
    let mut data = Vec::new();
    f.take(MAX_DB_SIZE + 1)
        .read_to_end(&mut data)
        .map_err(read_err)?;
    if data.len() as u64 > MAX_DB_SIZE {
        return Err(UserError::TooLarge {
            rootfs: rootfs.to_path_buf(),
            file: file.to_string(),
            limit: MAX_DB_SIZE,
        });
    }
    Ok(Some(String::from_utf8_lossy(&data).into_owned()))
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PasswdEntry {
    name: String,
    uid: u32,
    gid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupEntry {
    name: String,
    gid: u32,
    members: Vec<String>,
}

/// Parses passwd lines `name:pw:uid:gid:gecos:home:shell`; malformed lines are skipped, as
/// libc and containerd do.
fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?.to_string();
            let _pw = f.next()?;
            let uid = f.next()?.parse().ok()?;
            let gid = f.next()?.parse().ok()?;
            Some(PasswdEntry { name, uid, gid })
        })
        .collect()
}

/// Parses group lines `name:pw:gid:member,member`.
fn parse_group(text: &str) -> Vec<GroupEntry> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?.to_string();
            let _pw = f.next()?;
            let gid = f.next()?.parse().ok()?;
            let members = f
                .next()
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect();
            Some(GroupEntry { name, gid, members })
        })
        .collect()
}

/// Resolves `req` against `<rootfs>/etc/passwd` and `<rootfs>/etc/group`.
pub fn resolve_user(rootfs: &Path, req: &UserRequest) -> Result<User, UserError> {
    let root = open_root(rootfs).map_err(|source| UserError::OpenRoot {
        path: rootfs.to_path_buf(),
        source,
    })?;
    let passwd = read_db(&root, rootfs, "etc/passwd")?
        .map(|t| parse_passwd(&t))
        .unwrap_or_default();
    let needs_group_file = req.group_name.is_some() || !req.strict_supplemental_groups;
    let groups = if needs_group_file {
        read_db(&root, rootfs, "etc/group")?
            .map(|t| parse_group(&t))
            .unwrap_or_default()
    } else {
        Vec::new()
    };

    let entry = match (&req.user_name, req.uid) {
        (Some(name), _) => Some(passwd.iter().find(|e| &e.name == name).ok_or_else(|| {
            UserError::UserNotFound {
                user: name.clone(),
                rootfs: rootfs.to_path_buf(),
            }
        })?),
        (None, uid) => {
            let uid = uid.unwrap_or(0);
            passwd.iter().find(|e| e.uid == uid)
        }
    };
    let uid = entry.map_or(req.uid.unwrap_or(0), |e| e.uid);
    if req.run_as_non_root && uid == 0 {
        return Err(UserError::RunAsRoot {
            user: req.user_name.clone().unwrap_or_else(|| uid.to_string()),
        });
    }
    let gid = match (&req.group_name, req.gid) {
        (Some(name), _) => {
            groups
                .iter()
                .find(|g| &g.name == name)
                .ok_or_else(|| UserError::GroupNotFound {
                    group: name.clone(),
                    rootfs: rootfs.to_path_buf(),
                })?
                .gid
        }
        (None, Some(gid)) => gid,
        (None, None) => entry.map_or(0, |e| e.gid),
    };

    let mut additional = vec![gid];
    let mut push = |g: u32| {
        if !additional.contains(&g) {
            additional.push(g);
        }
    };
    if !req.strict_supplemental_groups {
        if let Some(name) = entry.map(|e| e.name.as_str()) {
            groups
                .iter()
                .filter(|g| g.name != name && g.members.iter().any(|m| m == name))
                .for_each(|g| push(g.gid));
        }
    }
    req.supplemental_groups.iter().for_each(|g| push(*g));

    let mut user = User::default();
    user.set_uid(uid);
    user.set_gid(gid);
    user.set_additional_gids(Some(additional));
    Ok(user)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
        # comment\n\
        daemon:x:1:1::/:/sbin/nologin\n\
        broken line\n\
        app:x:1000:1000:App:/home/app:/bin/sh\n\
        nogroup:x:1001:4242::/:/bin/sh\n";
    const GROUP: &str = "root:x:0:\n\
        wheel:x:10:root,app\n\
        app:x:1000:app\n\
        video:x:44:daemon, app\n\
        staff:x:50:\n";

    fn rootfs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir(dir.path().join("etc")).expect("etc");
        fs::write(dir.path().join("etc/passwd"), PASSWD).expect("passwd");
        fs::write(dir.path().join("etc/group"), GROUP).expect("group");
        dir
    }

    fn ids(u: &User) -> (u32, u32, Vec<u32>) {
        (
            u.uid(),
            u.gid(),
            u.additional_gids().clone().unwrap_or_default(),
        )
    }

    #[test]
    fn default_user_is_root_with_its_groups() {
        let r = rootfs();
        let u = resolve_user(r.path(), &UserRequest::default()).expect("resolve");
        assert_eq!(ids(&u), (0, 0, vec![0, 10]));
    }

    #[test]
    fn named_user_gets_passwd_gid_and_member_groups() {
        let r = rootfs();
        let req = UserRequest {
            user_name: Some("app".into()),
            supplemental_groups: vec![2000, 10, 3000],
            ..Default::default()
        };
        let u = resolve_user(r.path(), &req).expect("resolve");
        // Group "app" is the user's own group (excluded as supplementary, but primary).
        assert_eq!(ids(&u), (1000, 1000, vec![1000, 10, 44, 2000, 3000]));
    }

    #[test]
    fn uid_without_gid_uses_passwd_entry_or_zero() {
        let r = rootfs();
        let known = UserRequest {
            uid: Some(1001),
            ..Default::default()
        };
        assert_eq!(
            ids(&resolve_user(r.path(), &known).expect("known")),
            (1001, 4242, vec![4242])
        );
        let unknown = UserRequest {
            uid: Some(5555),
            ..Default::default()
        };
        assert_eq!(
            ids(&resolve_user(r.path(), &unknown).expect("unknown")),
            (5555, 0, vec![0])
        );
    }

    #[test]
    fn explicit_group_name_and_gid() {
        let r = rootfs();
        let named = UserRequest {
            uid: Some(1000),
            group_name: Some("staff".into()),
            ..Default::default()
        };
        assert_eq!(
            ids(&resolve_user(r.path(), &named).expect("named")),
            (1000, 50, vec![50, 10, 44])
        );
        let numeric = UserRequest {
            uid: Some(1000),
            gid: Some(7),
            strict_supplemental_groups: true,
            supplemental_groups: vec![8],
            ..Default::default()
        };
        assert_eq!(
            ids(&resolve_user(r.path(), &numeric).expect("numeric")),
            (1000, 7, vec![7, 8])
        );
        let missing = UserRequest {
            group_name: Some("nope".into()),
            ..Default::default()
        };
        let err = resolve_user(r.path(), &missing).expect_err("missing group");
        assert!(
            err.to_string().starts_with("group \"nope\" not found"),
            "{err}"
        );
    }

    #[test]
    fn unknown_or_unreadable_named_user_is_an_error() {
        let r = rootfs();
        let req = UserRequest {
            user_name: Some("ghost".into()),
            ..Default::default()
        };
        let err = resolve_user(r.path(), &req).expect_err("ghost");
        assert!(
            err.to_string().starts_with("user \"ghost\" not found"),
            "{err}"
        );
        let empty = tempfile::tempdir().expect("tempdir");
        let err = resolve_user(empty.path(), &req).expect_err("no passwd");
        assert!(matches!(err, UserError::UserNotFound { ref user, .. } if user == "ghost"));
        // A numeric uid needs no passwd at all.
        let num = UserRequest {
            uid: Some(3),
            ..Default::default()
        };
        assert_eq!(
            ids(&resolve_user(empty.path(), &num).expect("uid")),
            (3, 0, vec![0])
        );
    }

    #[test]
    fn run_as_non_root_refuses_uid_zero_by_number_or_name() {
        let r = rootfs();
        let by_uid = UserRequest {
            run_as_non_root: true,
            ..Default::default()
        };
        assert!(matches!(
            resolve_user(r.path(), &by_uid),
            Err(UserError::RunAsRoot { .. })
        ));
        let by_name = UserRequest {
            user_name: Some("root".into()),
            run_as_non_root: true,
            ..Default::default()
        };
        let err = resolve_user(r.path(), &by_name).expect_err("root by name");
        assert_eq!(
            err.to_string(),
            "container has runAsNonRoot and user \"root\" resolves to uid 0"
        );
        let ok = UserRequest {
            user_name: Some("app".into()),
            run_as_non_root: true,
            ..Default::default()
        };
        assert_eq!(resolve_user(r.path(), &ok).expect("app").uid(), 1000);
    }

    #[test]
    fn hostile_symlinks_stay_inside_the_rootfs() {
        // An "outside" file standing for /etc/shadow: it names a user the rootfs lacks.
        let outside = tempfile::tempdir().expect("outside");
        let secret = outside.path().join("shadow");
        fs::write(&secret, "evil:x:0:0::/:/bin/sh\n").expect("secret");

        let r = tempfile::tempdir().expect("rootfs");
        fs::create_dir(r.path().join("etc")).expect("etc");
        // Absolute symlink: resolved inside the rootfs, where the target does not exist.
        std::os::unix::fs::symlink(&secret, r.path().join("etc/passwd")).expect("symlink");
        let req = UserRequest {
            user_name: Some("evil".into()),
            ..Default::default()
        };
        let err = resolve_user(r.path(), &req).expect_err("must not read the host file");
        assert!(matches!(err, UserError::UserNotFound { .. }), "{err}");

        // Relative symlink climbing out with ../..: clamped at the rootfs root.
        fs::remove_file(r.path().join("etc/passwd")).expect("rm");
        let climb = format!("../../../../../../../..{}", secret.display());
        std::os::unix::fs::symlink(&climb, r.path().join("etc/passwd")).expect("symlink");
        let err = resolve_user(r.path(), &req).expect_err("must not climb out");
        assert!(matches!(err, UserError::UserNotFound { .. }), "{err}");

        // The same absolute target path recreated inside the rootfs IS what gets read.
        let inner = r.path().join(secret.strip_prefix("/").expect("absolute"));
        fs::create_dir_all(inner.parent().expect("parent")).expect("mkdir");
        fs::write(&inner, "evil:x:77:77::/:/bin/sh\n").expect("inner");
        fs::remove_file(r.path().join("etc/passwd")).expect("rm");
        std::os::unix::fs::symlink(&secret, r.path().join("etc/passwd")).expect("symlink");
        assert_eq!(resolve_user(r.path(), &req).expect("in-root").uid(), 77);
    }

    #[test]
    fn non_regular_passwd_is_refused() {
        let r = tempfile::tempdir().expect("rootfs");
        fs::create_dir_all(r.path().join("etc/passwd")).expect("dir as passwd");
        let err = resolve_user(r.path(), &UserRequest::default()).expect_err("dir");
        assert!(matches!(err, UserError::NotRegular { .. }), "{err}");
        let fifo = tempfile::tempdir().expect("rootfs");
        fs::create_dir(fifo.path().join("etc")).expect("etc");
        nix::unistd::mkfifo(
            &fifo.path().join("etc/passwd"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
        let err = resolve_user(fifo.path(), &UserRequest::default()).expect_err("fifo");
        assert!(matches!(err, UserError::NotRegular { .. }), "{err}");
    }
}
