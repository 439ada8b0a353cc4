//! nodeapi::containerlogs: `/containerLogs/{namespace}/{pod}/{container}`, the kubelet's
//! container log endpoint (what `kubectl logs` reaches through the API server), over the CRI
//! log files podvisor writes, read with [`crate::logs`]'s reader and follower.
//!
//! Query parameters as the kubelet's `PodLogOptions`: `follow`, `previous`, `timestamps`
//! (Go booleans: `true`, `1`, `t`...), `tailLines` (>= 0), `sinceSeconds` (> 0) or
//! `sinceTime` (RFC 3339; not both), `limitBytes` (> 0). A line is the container's output
//! without the CRI prefix; `timestamps` puts its RFC 3339 time in front. Without `follow`
//! the log's rotated files are read too (the kubelet reads only the current file; nothing on
//! disk is hidden). `follow` streams (chunked) until the client hangs up, the container stops
//! running or restarts into a new log file, `limitBytes` is reached, or the server stops; at
//! most [`super::routes::Context::max_followers`] followers stream at once, more get 503.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use super::context::Context;
use crate::httpserver::{write_response, Conn, Followed, Pace, Response, Slot};
use crate::logs::{read_log, FollowStart, LogFollower, LogLine, ReadOptions};
use crate::status::Snapshot;

/// How often a follower looks at the log, the client and the pod.
const TICK: Duration = Duration::from_millis(500);
/// How long one write to a follower's client may take.
const WRITE_DEADLINE: Duration = Duration::from_secs(30);

/// The query's `PodLogOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<usize>,
    pub since: Option<SystemTime>,
    pub limit_bytes: Option<u64>,
}

/// Why a `/containerLogs` query is refused (the 400 answer's text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogQueryError {
    #[error("{name}: bad escape")]
    Escape { name: String },
    #[error("{name}: invalid boolean {value:?}")]
    Boolean { name: String, value: String },
    #[error("{name}: invalid integer {value:?}")]
    Integer { name: String, value: String },
    #[error("{name}: must be {bound}")]
    OutOfRange {
        name: &'static str,
        bound: &'static str,
    },
    #[error("sinceTime: invalid RFC 3339 time {value:?}")]
    Time { value: String },
    #[error("at most one of sinceTime or sinceSeconds may be specified")]
    BothSince,
}

/// Go's `strconv.ParseBool`.
fn go_bool(name: &str, v: &str) -> Result<bool, LogQueryError> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(LogQueryError::Boolean {
            name: name.to_string(),
            value: v.to_string(),
        }),
    }
}

fn number(name: &str, v: &str) -> Result<i64, LogQueryError> {
    v.parse::<i64>().map_err(|_| LogQueryError::Integer {
        name: name.to_string(),
        value: v.to_string(),
    })
}

/// Parses the query (unknown parameters are ignored, as the kubelet's decoder does).
pub fn parse_options(query: &str, now: SystemTime) -> Result<LogOptions, LogQueryError> {
    let mut o = LogOptions::default();
    let mut since_seconds = None;
    let mut since_time = None;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, "true"));
        let v = crate::httpserver::percent_decode(v).ok_or_else(|| LogQueryError::Escape {
            name: k.to_string(),
        })?;
        match k {
            "follow" => o.follow = go_bool(k, &v)?,
            "previous" => o.previous = go_bool(k, &v)?,
            "timestamps" => o.timestamps = go_bool(k, &v)?,
            "tailLines" => {
                let n = number(k, &v)?;
                if n < 0 {
                    return Err(LogQueryError::OutOfRange {
                        name: "tailLines",
                        bound: "greater than or equal to 0",
                    });
                }
                o.tail_lines = Some(usize::try_from(n).unwrap_or(usize::MAX));
            }
            "sinceSeconds" => {
                let n = number(k, &v)?;
                if n < 1 {
                    return Err(LogQueryError::OutOfRange {
                        name: "sinceSeconds",
                        bound: "greater than 0",
                    });
                }
                since_seconds = Some(n as u64);
            }
            "sinceTime" => {
                let t: k8s_openapi::jiff::Timestamp = v
                    .parse()
                    .map_err(|_| LogQueryError::Time { value: v.clone() })?;
                since_time = Some(SystemTime::from(t));
            }
            "limitBytes" => {
                let n = number(k, &v)?;
                if n < 1 {
                    return Err(LogQueryError::OutOfRange {
                        name: "limitBytes",
                        bound: "greater than 0",
                    });
                }
                o.limit_bytes = Some(n as u64);
            }
            _ => {}
        }
    }
    o.since = match (since_seconds, since_time) {
        (Some(_), Some(_)) => return Err(LogQueryError::BothSince),
        (Some(s), None) => Some(now - Duration::from_secs(s)),
        (None, t) => t,
    };
    Ok(o)
}

/// What a follower streams.
#[derive(Debug)]
pub struct FollowPlan {
    /// `namespace/name`.
    pub pod: String,
    pub container: String,
    pub path: PathBuf,
    pub start: FollowStart,
    pub options: LogOptions,
}

/// Turns lines into output as the options say; counts `written` against `limitBytes`.
/// Returns the bytes and whether the limit was reached.
fn render(lines: &[LogLine], o: &LogOptions, written: &mut u64) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    for l in lines {
        if let Some(since) = o.since {
            let at = l
                .timestamp
                .parse::<k8s_openapi::jiff::Timestamp>()
                .map(SystemTime::from);
            if at.is_ok_and(|t| t < since) {
                continue;
            }
        }
        let start = out.len();
        if o.timestamps {
            out.extend_from_slice(l.timestamp.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&l.content);
        out.push(b'\n');
        if let Some(limit) = o.limit_bytes {
            let room = limit.saturating_sub(*written);
            let line = (out.len() - start) as u64;
            if line >= room {
                out.truncate(start + room as usize);
                *written = limit;
                return (out, true);
            }
            *written += line;
        }
    }
    (out, false)
}

/// What `/containerLogs` answers.
#[derive(Debug)]
pub enum Logs {
    Whole(Response),
    Follow(FollowPlan),
}

impl From<Response> for Logs {
    fn from(r: Response) -> Logs {
        Logs::Whole(r)
    }
}

/// `/containerLogs/{ns}/{pod}/{container}`: the whole log, or a plan to follow it.
pub fn answer(ns: &str, pod: &str, container: &str, query: &str, snap: &Snapshot) -> Logs {
    let opts = match parse_options(query, SystemTime::now()) {
        Ok(o) => o,
        Err(e) => return Response::text(400, &e.to_string()).into(),
    };
    let Some(view) = snap.pods.iter().find(|v| {
        v.pod.metadata.namespace.as_deref() == Some(ns)
            && v.pod.metadata.name.as_deref() == Some(pod)
    }) else {
        return Response::text(404, &format!("pod {ns}/{pod} not found")).into();
    };
    let declared = view.pod.spec.iter().any(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .any(|c| c.name == container)
    });
    if !declared {
        return Response::text(
            404,
            &format!("container {container:?} not found in pod {ns}/{pod}"),
        )
        .into();
    }
    let paths = if opts.previous {
        &view.previous_log_paths
    } else {
        &view.log_paths
    };
    let Some(path) = paths.get(container) else {
        let msg = if opts.previous {
            format!("previous terminated container {container:?} in pod {ns}/{pod} not found")
        } else {
            format!("container {container:?} in pod {ns}/{pod} is waiting to start: no log yet")
        };
        return Response::text(400, &msg).into();
    };
    if opts.follow && !opts.previous {
        return Logs::Follow(FollowPlan {
            pod: format!("{ns}/{pod}"),
            container: container.to_string(),
            path: path.clone(),
            start: match opts.tail_lines {
                Some(n) => FollowStart::Tail(n),
                None => FollowStart::Beginning,
            },
            options: opts,
        });
    }
    let lines = match read_log(
        path,
        ReadOptions {
            tail: opts.tail_lines,
            include_rotated: true,
        },
    ) {
        Ok(l) => l,
        Err(e) => {
            return Response::text(500, &format!("reading the log of {container}: {e}")).into()
        }
    };
    let (body, _) = render(&lines, &opts, &mut 0);
    Response::plain(200, body).into()
}

/// Whether the snapshot still shows the followed container running with the followed log.
fn still_following(ctx: &Context, plan: &FollowPlan) -> bool {
    let snap = ctx.snapshots.get();
    snap.pods.iter().any(|v| {
        crate::status::full_name(&v.pod) == plan.pod
            && v.log_paths.get(&plan.container) == Some(&plan.path)
            && crate::api::handlers::container_running(&v.pod, &plan.container)
    })
}

/// A followed container log, rendered with the query's options.
struct Source<'a> {
    follower: LogFollower,
    plan: &'a FollowPlan,
    ctx: &'a Context,
    written: u64,
}

impl Followed for Source<'_> {
    fn poll(&mut self) -> Option<(Vec<u8>, bool)> {
        match self.follower.poll() {
            Ok(lines) => Some(render(&lines, &self.plan.options, &mut self.written)),
            Err(e) => {
                log::warn!(
                    "node API: following the log of {} in {}: {e}",
                    self.plan.container,
                    self.plan.pod
                );
                None
            }
        }
    }

    fn goes_on(&mut self) -> bool {
        still_following(self.ctx, self.plan)
    }

    fn stopping(&self) -> bool {
        self.ctx.stop.load(Ordering::SeqCst)
    }
}

/// Streams `plan` to `out` (see the module docs). A read error after the head was sent ends
/// the stream without its last chunk, so the client sees it was cut short.
pub fn follow<C: Conn>(out: &mut C, plan: &FollowPlan, ctx: &Context) -> io::Result<()> {
    let Some(_slot) = Slot::acquire(&ctx.followers, ctx.max_followers) else {
        let r = Response::text(
            503,
            &format!(
                "too many log followers (at most {}), try again later",
                ctx.max_followers
            ),
        );
        return write_response(out, &r, false);
    };
    let follower = match LogFollower::new(&plan.path, plan.start) {
        Ok(f) => f,
        Err(e) => {
            let r = Response::text(500, &format!("reading the log of {}: {e}", plan.container));
            return write_response(out, &r, false);
        }
    };
    let mut source = Source {
        follower,
        plan,
        ctx,
        written: 0,
    };
    let pace = Pace {
        tick: TICK,
        write: WRITE_DEADLINE,
    };
    let head = Response::plain(200, Vec::new());
    crate::httpserver::follow(out, &head, true, &mut source, pace)
}

#[cfg(test)]
mod tests {
    use super::super::routes::tests::{context, get};
    use super::*;
    use crate::logs::writer::{CriLogWriter, LogOptions as WriterOptions};
    use crate::logs::Stream;
    use std::time::UNIX_EPOCH;

    #[test]
    fn options_as_the_kubelet_parses_them() {
        let now = UNIX_EPOCH + Duration::from_secs(1000);
        let o = parse_options(
            "follow=true&tailLines=5&timestamps=1&sinceSeconds=10&x=y",
            now,
        )
        .expect("ok");
        assert!(o.follow && o.timestamps && !o.previous);
        assert_eq!(o.tail_lines, Some(5));
        assert_eq!(o.since, Some(UNIX_EPOCH + Duration::from_secs(990)));
        let o =
            parse_options("previous&sinceTime=1970-01-01T00:00:05Z&limitBytes=3", now).expect("ok");
        assert!(o.previous);
        assert_eq!(o.since, Some(UNIX_EPOCH + Duration::from_secs(5)));
        assert_eq!(o.limit_bytes, Some(3));
        for bad in [
            "tailLines=-1",
            "tailLines=x",
            "sinceSeconds=0",
            "follow=yes",
            "limitBytes=0",
            "sinceSeconds=5&sinceTime=1970-01-01T00:00:05Z",
            "sinceTime=yesterday",
        ] {
            assert!(parse_options(bad, now).is_err(), "{bad}");
        }
    }

    fn line(ts: &str, content: &str) -> LogLine {
        LogLine {
            timestamp: ts.into(),
            stream: Stream::Stdout,
            content: content.as_bytes().to_vec(),
        }
    }

    #[test]
    fn rendering_with_timestamps_since_and_a_byte_limit() {
        let lines = [
            line("1970-01-01T00:00:01.000000000Z", "one"),
            line("1970-01-01T00:00:10.000000000Z", "two"),
            line("1970-01-01T00:00:20.000000000Z", "three"),
        ];
        let o = LogOptions {
            timestamps: true,
            since: Some(UNIX_EPOCH + Duration::from_secs(10)),
            ..Default::default()
        };
        let (out, done) = render(&lines, &o, &mut 0);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "1970-01-01T00:00:10.000000000Z two\n1970-01-01T00:00:20.000000000Z three\n"
        );
        assert!(!done);
        let o = LogOptions {
            limit_bytes: Some(6),
            ..Default::default()
        };
        let (out, done) = render(&lines, &o, &mut 0);
        assert_eq!(out, b"one\ntw");
        assert!(done);
    }

    #[test]
    fn whole_logs_and_errors_of_the_endpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("0.log");
        let mut w = CriLogWriter::open(&log, WriterOptions::default()).expect("writer");
        for i in 0..5 {
            w.write(
                Stream::Stdout,
                format!("line {i}\n").as_bytes(),
                SystemTime::now(),
            )
            .expect("write");
        }
        let mut snap = super::super::routes::tests::snapshot();
        snap.pods[1].log_paths.insert("main".into(), log.clone());
        let ctx = context(snap, dir.path());
        let r = get("/containerLogs/default/web-node/main?tailLines=2", &ctx);
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"line 3\nline 4\n"[..])
        );
        assert_eq!(get("/containerLogs/default/nope/main", &ctx).status, 404);
        assert_eq!(
            get("/containerLogs/default/web-node/nope", &ctx).status,
            404
        );
        assert_eq!(
            get("/containerLogs/default/web-node/main?previous=true", &ctx).status,
            400
        );
        assert_eq!(
            get("/containerLogs/default/web-node/side", &ctx).status,
            400
        );
        assert_eq!(
            get("/containerLogs/default/web-node/main?tailLines=-2", &ctx).status,
            400
        );
    }
}
