//! httpserver: the one HTTP/1.1 server core under podvisor's two hand-written servers, the
//! unix-socket API (`api::server`) and the node ports (`nodeapi`: healthz, and the HTTPS port
//! over rustls). It owns what every exchange does the same way:
//!
//! - [`head`]: reading a request head within [`MAX_HEAD`] bytes and [`MAX_HEADERS`]
//!   headers, a bounded `Content-Length` body, path, query and `%XX` escapes;
//! - [`conn`]: the connection — a socket under a whole-exchange deadline
//!   ([`DeadlineStream`], so a slowloris client is cut however it trickles bytes), noticing a
//!   client that hung up while a followed log is quiet, and ending it; [`tls`]: the same over
//!   a rustls stream;
//! - [`exchange`]: one request per connection — head, the auth hook ([`Authorize`]), the
//!   server's [`Service`], which owns the raw stream after the head (room for a later
//!   protocol upgrade);
//! - [`response`]: whole responses (`Content-Length`, `Connection: close`) and chunked
//!   streams, each chunk flushed as written; [`follow`]: following a growing log.
//!
//! The servers are hand-written rather than tiny_http: following a log needs every line
//! flushed as it arrives (tiny_http's chunked encoder buffers 8 KiB and `io::copy` never
//! flushes it) and needs the connection's socket to notice a client that hung up while the
//! log is quiet (tiny_http keeps the socket to itself), or idle followers would pile up; and
//! with no async runtime, every limit stays visible in a few hundred lines. Accepting
//! connections stays with each server (a unix socket file, TCP ports with bind retries); it
//! imports nothing of podvisor's.

pub mod conn;
pub mod exchange;
pub mod follow;
pub mod head;
pub mod response;
pub mod tls;

pub use conn::{Conn, DeadlineStream, Socket};
pub use exchange::{Authorize, Exchange, Service};
pub use follow::{follow, Followed, Pace, Slot};
pub use head::{
    parse_head, percent_decode, query_param, read_body, read_head, BodyError, HeadError,
    RequestHead, MAX_HEAD, MAX_HEADERS,
};
pub use response::{
    reason_phrase, write_chunk, write_last_chunk, write_response, write_sized_head,
    write_stream_data, write_stream_head, Response,
};
pub use tls::TlsConn;
