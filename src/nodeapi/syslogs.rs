//! nodeapi::syslogs: `/logs/`, the node's log files as the kubelet serves /var/log (Go's
//! `http.FileServer`): a directory is an HTML listing (`<pre>` of links, directories with a
//! trailing `/`), a regular file is sent as is, `/logs` and a directory without its trailing
//! slash redirect (301) as Go's file server does.
//!
//! What is safe, and where podvisor is stricter than the kubelet:
//! - every path is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` below an
//!   `O_PATH` descriptor of /var/log: `..`, absolute symlinks and symlinks that lead out of
//!   /var/log are refused (403; the kubelet's file server follows a symlink anywhere);
//! - only directories and regular files are served: a FIFO, socket or device is refused
//!   (403), and files are opened `O_NONBLOCK` so that nothing can block a connection thread;
//! - a file is sent up to its size when opened (a growing log is not followed), in writes that
//!   must each complete within 30 s;
//! - the kubelet's node log query (`?query=`, `enableSystemLogQuery`) is not implemented: 400;
//! - the route is authorized as the kubelet's (`nodes/log`), and exists only with
//!   `enableDebuggingHandlers` and `enableSystemLogHandler` (both default true, as the kubelet).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use rustix::fs::{FileType, OFlags, ResolveFlags};

use crate::httpserver::{write_sized_head, Conn, Response};

/// How long one write of a file's bytes may take.
const WRITE_DEADLINE: Duration = Duration::from_secs(30);

/// What `/logs` answers.
#[derive(Debug)]
pub enum SysLog {
    Whole(Response),
    File(FilePlan),
}

type Answer = SysLog;

impl From<Response> for SysLog {
    fn from(r: Response) -> SysLog {
        SysLog::Whole(r)
    }
}

/// A file to send.
#[derive(Debug)]
pub struct FilePlan {
    pub file: File,
    pub len: u64,
    pub content_type: &'static str,
}

fn redirect(to: &str) -> Answer {
    let mut r = Response::text(301, &format!("<a href=\"{to}\">Moved Permanently</a>."));
    r.headers.push(("Location", to.to_string()));
    r.into()
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A path segment escaped for a URL (what Go's `url.URL{Path: name}.String()` gives).
fn url_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn error(e: io::Error) -> Answer {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => Response::not_found().into(),
        Some(libc::EXDEV) | Some(libc::ELOOP) => {
            Response::text(403, "403 Forbidden: the path leads out of /var/log").into()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => Response::text(403, "403 Forbidden").into(),
        _ => Response::text(500, &format!("500 Internal Server Error: {e}")).into(),
    }
}

/// `/logs` (`rel` `None`) or `/logs/{rel}` below `dir`.
pub fn answer(dir: &Path, request_path: &str, query: &str) -> Answer {
    if query
        .split('&')
        .any(|kv| kv == "query" || kv.starts_with("query="))
    {
        return Response::text(
            400,
            "the node log query (?query=, enableSystemLogQuery) is not supported by podvisor",
        )
        .into();
    }
    let Some(rel) = request_path.strip_prefix("/logs/") else {
        return redirect("/logs/");
    };
    let Some(rel) = crate::httpserver::percent_decode(rel) else {
        return Response::text(400, "bad escape in the path").into();
    };
    if rel.contains('\0') {
        return Response::text(400, "bad path").into();
    }
    let root = match crate::sys::at::open_root(dir) {
        Ok(r) => r,
        Err(e) => return error(e),
    };
    let fd = match crate::sys::at::openat2_in_root(
        &root,
        Path::new(&rel),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        Err(e) => return error(e),
    };
    let st = match rustix::fs::fstat(&fd) {
        Ok(st) => st,
        Err(e) => return error(e.into()),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => {
            if !rel.is_empty() && !rel.ends_with('/') {
                return redirect(&format!("/logs/{}/", rel));
            }
            listing(fd).unwrap_or_else(error)
        }
        FileType::RegularFile => SysLog::File(FilePlan {
            file: File::from(fd),
            len: st.st_size as u64,
            content_type: if rel.ends_with(".gz") {
                "application/gzip"
            } else {
                "text/plain; charset=utf-8"
            },
        }),
        _ => Response::text(403, "403 Forbidden: not a regular file").into(),
    }
}

/// Go's directory listing: names sorted, directories with a trailing `/`.
fn listing(fd: std::os::fd::OwnedFd) -> io::Result<Answer> {
    let mut dir = rustix::fs::Dir::read_from(fd.as_fd()).map_err(io::Error::from)?;
    let mut names = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => rustix::fs::statat(
                fd.as_fd(),
                entry.file_name(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            _ => false,
        };
        names.push(if is_dir { format!("{name}/") } else { name });
    }
    names.sort();
    let mut body = String::from("<pre>\n");
    for n in names {
        body.push_str(&format!(
            "<a href=\"{}\">{}</a>\n",
            url_escape(&n).replace("%2F", "/"),
            html_escape(&n)
        ));
    }
    body.push_str("</pre>\n");
    Ok(Response {
        status: 200,
        content_type: "text/html; charset=utf-8",
        headers: Vec::new(),
        body: body.into_bytes(),
    }
    .into())
}

/// Sends `plan`: its first `len` bytes, with `Content-Length`.
pub fn send<C: Conn>(out: &mut C, plan: &mut FilePlan, head_only: bool) -> io::Result<()> {
    out.extend_deadline(WRITE_DEADLINE);
    let head = Response {
        content_type: plan.content_type,
        ..Response::plain(200, Vec::new())
    };
    write_sized_head(out, &head, plan.len)?;
    if head_only {
        return out.flush();
    }
    let mut left = plan.len;
    let mut buf = vec![0u8; 64 * 1024];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = match plan.file.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        out.extend_deadline(WRITE_DEADLINE);
        out.write_all(&buf[..n])?;
        left -= n as u64;
    }
    // A file that shrank meanwhile: the client sees a short body.
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(a: SysLog) -> Response {
        match a {
            SysLog::Whole(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn listings_files_and_what_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let d = tmp.path().join("varlog");
        std::fs::create_dir_all(d.join("apt")).expect("mkdir");
        std::fs::write(d.join("syslog"), "hello\n").expect("w");
        std::fs::write(d.join("a <b>.log"), "x").expect("w");
        std::fs::write(tmp.path().join("secret"), "no").expect("w");
        std::os::unix::fs::symlink("../secret", d.join("escape")).expect("ln");
        std::os::unix::fs::symlink("syslog", d.join("inside")).expect("ln");
        nix::unistd::mkfifo(
            &d.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("fifo");
        let r = whole(answer(&d, "/logs/", ""));
        assert_eq!(r.status, 200);
        let body = String::from_utf8(r.body).expect("utf8");
        assert!(body.starts_with("<pre>\n"), "{body}");
        assert!(body.contains("<a href=\"apt/\">apt/</a>\n"), "{body}");
        assert!(
            body.contains("<a href=\"a%20%3Cb%3E.log\">a &lt;b&gt;.log</a>\n"),
            "{body}"
        );
        match answer(&d, "/logs/syslog", "") {
            SysLog::File(p) => assert_eq!(p.len, 6),
            other => panic!("{other:?}"),
        }
        match answer(&d, "/logs/inside", "") {
            SysLog::File(p) => assert_eq!(p.len, 6),
            other => panic!("{other:?}"),
        }
        assert_eq!(whole(answer(&d, "/logs/escape", "")).status, 403);
        assert_eq!(whole(answer(&d, "/logs/../secret", "")).status, 403);
        assert_eq!(whole(answer(&d, "/logs/%2e%2e/secret", "")).status, 403);
        assert_eq!(whole(answer(&d, "/logs/fifo", "")).status, 403);
        assert_eq!(whole(answer(&d, "/logs/nope", "")).status, 404);
        let r = whole(answer(&d, "/logs/apt", ""));
        assert_eq!(r.status, 301);
        assert!(r.headers.contains(&("Location", "/logs/apt/".to_string())));
        assert_eq!(whole(answer(&d, "/logs", "")).status, 301);
        assert_eq!(whole(answer(&d, "/logs/", "query=kubelet")).status, 400);
    }
}
