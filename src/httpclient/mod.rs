//! httpclient: the one way podvisor reads HTTP(S) responses from the network. Every client
//! (the manifest URL source, the registry client, and API clients to come such as a mirror-pod
//! client) builds its ureq agent and requests from a [`Limits`] and reads bodies with
//! [`read_body`] or [`body_reader`], so no server can make podvisor allocate more than the
//! limit or wait longer than the deadline.
//!
//! Two ureq behaviours this module exists for:
//! - ureq (with its `gzip` feature) decodes `Content-Encoding: gzip` transparently, and its
//!   own body limit (`BodyWithConfig::limit`) counts the bytes on the wire, *below* the
//!   decoder: a 1 MB gzip body holding 1 GiB passes a 10 MiB limit and is decoded whole into
//!   memory. Here the limit counts decoded bytes (and the wire is capped too, so a stream of
//!   empty gzip members cannot run forever either).
//! - ureq's phase timeouts are deadlines, not per-read timeouts: `timeout_recv_response`
//!   covers the whole response head from the moment the request is sent, `timeout_recv_body`
//!   the whole body from the end of the head, `timeout_global` everything including
//!   redirects. A server trickling one byte a second still hits them. Per-read timeouts,
//!   which a trickle resets, are never used.
//!
//! Errors are [`HttpError`]s that name what was exceeded; callers add their context (URL,
//! reference, digest).

use std::io::{self, Read};
use std::time::Duration;

use ureq::config::ConfigBuilder;
use ureq::typestate::AgentScope;
use ureq::{Agent, Body, RequestBuilder};

#[cfg(test)]
pub(crate) mod hostile;
pub mod tls;

/// What one kind of request may cost. All durations are deadlines (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest body read, counted after decompression.
    pub max_body: u64,
    /// Largest response head (status line and headers).
    pub max_head: usize,
    /// Redirects followed; one more is [`HttpError::TooManyRedirects`].
    pub max_redirects: u32,
    /// Name resolution, TCP connect and TLS handshake.
    pub connect: Duration,
    /// From the request sent to the end of the response head.
    pub head: Duration,
    /// From the end of the head to the end of the body.
    pub body: Duration,
    /// The whole exchange, redirects and body included.
    pub total: Duration,
}

/// Sets every limit of `$l` on a ureq `ConfigBuilder` (agent or request scope: ureq's scope
/// trait is private, so a generic function cannot name it).
macro_rules! with_limits {
    ($builder:expr, $l:expr) => {
        $builder
            .max_response_header_size($l.max_head)
            .max_redirects($l.max_redirects)
            .max_redirects_will_error(true)
            .timeout_connect(Some($l.connect))
            .timeout_recv_response(Some($l.head))
            .timeout_recv_body(Some($l.body))
            .timeout_global(Some($l.total))
    };
}

impl Limits {
    /// An agent configuration with these limits (statuses are not errors: callers decide);
    /// callers add TLS, proxy or user-agent settings and build it.
    pub fn agent_config(&self) -> ConfigBuilder<AgentScope> {
        with_limits!(Agent::config_builder().http_status_as_error(false), self)
    }

    /// A request with these limits instead of its agent's (the registry client's blob
    /// downloads get a body deadline that grows with the blob).
    pub fn request<B>(&self, req: RequestBuilder<B>) -> RequestBuilder<B> {
        with_limits!(req.config(), self).build()
    }

    /// Names a ureq error of a request made with these limits.
    pub fn error(&self, err: ureq::Error) -> HttpError {
        use ureq::Timeout as T;
        match err {
            ureq::Error::Timeout(which) => {
                let (phase, after) = match which {
                    T::Resolve | T::Connect => (Phase::Connect, self.connect),
                    T::RecvResponse => (Phase::Head, self.head),
                    T::RecvBody => (Phase::Body, self.body),
                    _ => (Phase::Total, self.total),
                };
                HttpError::Timeout { phase, after }
            }
            ureq::Error::BodyExceedsLimit(_) => HttpError::BodyTooLarge {
                limit: self.max_body,
            },
            ureq::Error::LargeResponseHeader(_, _) => HttpError::HeadTooLarge {
                limit: self.max_head,
            },
            ureq::Error::TooManyRedirects => HttpError::TooManyRedirects {
                max: self.max_redirects,
            },
            other => HttpError::Transport {
                detail: other.to_string(),
            },
        }
    }

    /// Names an error returned by a body reader of a request made with these limits.
    pub fn io_error(&self, err: io::Error) -> HttpError {
        if let Some(e) = err.get_ref().and_then(|e| e.downcast_ref::<HttpError>()) {
            return e.clone();
        }
        self.error(ureq::Error::from(err))
    }
}

/// The part of an exchange a deadline covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Connect,
    Head,
    Body,
    Total,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Connect => "connecting",
            Phase::Head => "receiving the response headers",
            Phase::Body => "receiving the response body",
            Phase::Total => "for the whole request",
        })
    }
}

/// Why a response could not be read, naming the limit that was hit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("timed out after {after:?} {phase}")]
    Timeout { phase: Phase, after: Duration },
    #[error("response body is larger than the {limit}-byte limit (counted after decompression)")]
    BodyTooLarge { limit: u64 },
    #[error("response headers are larger than the {limit}-byte limit")]
    HeadTooLarge { limit: usize },
    #[error("more than {max} redirects")]
    TooManyRedirects { max: u32 },
    #[error("{detail}")]
    Transport { detail: String },
}

/// The wire bytes allowed for a body of at most `max` decoded bytes: gzip never grows data by
/// more than a few bytes per 16 KiB block, so anything beyond this is not such a body.
fn wire_limit(max: u64) -> u64 {
    max.saturating_add(max / 8).saturating_add(64 << 10)
}

/// Reads a whole body of at most `limits.max_body` decoded bytes into memory.
pub fn read_body(body: &mut Body, limits: &Limits) -> Result<Vec<u8>, HttpError> {
    let wire = body
        .with_config()
        .limit(wire_limit(limits.max_body))
        .reader();
    let mut out = Vec::new();
    bounded(wire, limits.max_body)
        .read_to_end(&mut out)
        .map_err(|e| limits.io_error(e))?;
    Ok(out)
}

/// A streaming reader of at most `max` decoded bytes of `body` (its wire capped as in
/// [`read_body`]); one byte more is an error that [`Limits::io_error`] names
/// [`HttpError::BodyTooLarge`].
pub fn body_reader(body: Body, max: u64) -> BoundedReader<ureq::BodyReader<'static>> {
    bounded(body.into_with_config().limit(wire_limit(max)).reader(), max)
}

fn bounded<R: Read>(inner: R, max: u64) -> BoundedReader<R> {
    BoundedReader {
        inner,
        left: max,
        limit: max,
    }
}

/// See [`body_reader`].
pub struct BoundedReader<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for BoundedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // At the limit: only the end of the body is acceptable.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(HttpError::BodyTooLarge {
                    limit: self.limit,
                })),
            };
        }
        let want = usize::try_from(self.left)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
