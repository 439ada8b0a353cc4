//! httpserver::exchange: one request on one connection, the same for every server — read the
//! head under the connection's deadline (a bad head is answered with the server's own error
//! reply), move the deadline for the response, ask the auth hook ([`Authorize`], the node
//! API's authentication and authorization; the unix API has none, its socket's permissions
//! decide), then hand the connection and the head to the server's [`Service`], and end the
//! connection.
//!
//! The service owns the connection from the end of the head until it returns: it may read a
//! body, write a whole answer or stream one, or (a later protocol upgrade: SPDY or WebSocket
//! for exec, attach and port-forward) answer `101` and speak another protocol on the raw
//! stream, starting with [`RequestHead::rest`], the bytes the client sent past the head.

use std::io;
use std::time::Duration;

use super::conn::Conn;
use super::head::{read_head, HeadError, RequestHead};
use super::response::{write_response, Response};

/// The auth hook: decides, from the connection (a TLS client certificate) and the head
/// (`Authorization`, method and path), whether a request goes on.
pub trait Authorize<C> {
    /// `Err(response)` refuses the request with that response (401, 403) before anything else
    /// of it is read.
    fn authorize(&self, conn: &C, head: &RequestHead) -> Result<(), Response>;
}

/// What one server answers.
pub trait Service<C> {
    /// The reply to a request head that could not be read ([`HeadError::status`]).
    fn bad_head(&self, err: &HeadError) -> Response;
    /// Answers the request (see the module docs); an error is a client that went away.
    fn respond(&self, conn: &mut C, head: &RequestHead) -> io::Result<()>;
}

/// How one server runs its exchanges.
#[derive(Debug, Clone, Copy)]
pub struct Exchange {
    /// Names the server in log lines.
    pub name: &'static str,
    /// The deadline for the response, from the end of the head (or of a bad head); `None`
    /// keeps the connection's deadline for the whole exchange.
    pub response: Option<Duration>,
}

impl Exchange {
    /// Serves one request on `conn`, whose deadline already bounds the head, and ends the
    /// connection.
    pub fn serve<C: Conn>(
        &self,
        conn: &mut C,
        auth: Option<&dyn Authorize<C>>,
        service: &impl Service<C>,
    ) {
        let head = match read_head(conn) {
            Ok(Some(h)) => h,
            Ok(None) => return conn.finish(false),
            Err(e) => {
                self.response_deadline(conn);
                // A client that does not read its error only loses it.
                let _ = write_response(conn, &service.bad_head(&e), false);
                return conn.finish(true);
            }
        };
        self.response_deadline(conn);
        if let Some(Err(resp)) = auth.map(|a| a.authorize(conn, &head)) {
            let _ = write_response(conn, &resp, head.method == "HEAD");
            return conn.finish(true);
        }
        match service.respond(conn, &head) {
            Ok(()) => conn.finish(true),
            Err(e) => {
                log::debug!(
                    "{}: {} {}: client went away: {e}",
                    self.name,
                    head.method,
                    head.target
                );
                conn.finish(false);
            }
        }
    }

    fn response_deadline<C: Conn>(&self, conn: &mut C) {
        if let Some(limit) = self.response {
            conn.extend_deadline(limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conn::DeadlineStream;
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    struct Echo;

    impl<C: Conn> Service<C> for Echo {
        fn bad_head(&self, err: &HeadError) -> Response {
            Response::text(err.status(), &err.to_string())
        }
        fn respond(&self, conn: &mut C, head: &RequestHead) -> io::Result<()> {
            write_response(conn, &Response::plain(200, head.path().to_string()), false)
        }
    }

    struct Deny;

    impl<C> Authorize<C> for Deny {
        fn authorize(&self, _: &C, head: &RequestHead) -> Result<(), Response> {
            match head.header("authorization") {
                Some("ok") => Ok(()),
                _ => Err(Response::text(401, "Unauthorized")),
            }
        }
    }

    fn exchange(
        request: &[u8],
        auth: Option<&dyn Authorize<DeadlineStream<UnixStream>>>,
    ) -> String {
        let (a, mut b) = UnixStream::pair().expect("pair");
        b.write_all(request).expect("send");
        b.shutdown(std::net::Shutdown::Write)
            .expect("end of request");
        let mut conn = DeadlineStream::new(a, Instant::now() + Duration::from_secs(5));
        let ex = Exchange {
            name: "test",
            response: Some(Duration::from_secs(5)),
        };
        ex.serve(&mut conn, auth, &Echo);
        let mut out = String::new();
        b.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn heads_auth_and_answers() {
        let ok = exchange(b"GET /x?y HTTP/1.1\r\n\r\n", None);
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\n/x"), "{ok}");
        let bad = exchange(b"nonsense\r\n\r\n", None);
        assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
        let refused = exchange(b"GET /x HTTP/1.1\r\n\r\n", Some(&Deny));
        assert!(refused.starts_with("HTTP/1.1 401 "), "{refused}");
        let allowed = exchange(b"GET /x HTTP/1.1\r\nAuthorization: ok\r\n\r\n", Some(&Deny));
        assert!(allowed.starts_with("HTTP/1.1 200 "), "{allowed}");
        assert_eq!(exchange(b"", None), "");
    }
}
