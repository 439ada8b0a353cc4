//! httpserver::follow: a streamed answer that follows a growing source (a container's log)
//! — bounded [`Slot`]s for the streams at once, and [`follow`]: new bytes sent as they arrive,
//! each piece flushed at once, until the source ends, the server stops, or the client hangs up
//! while the source is quiet (so idle followers do not pile up).

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::conn::Conn;
use super::response::{write_last_chunk, write_stream_data, write_stream_head, Response};

/// One of a bounded number of slots (followers streaming at once), held until dropped.
#[derive(Debug)]
pub struct Slot<'a>(&'a AtomicUsize);

impl<'a> Slot<'a> {
    /// A slot of `count`'s, unless `limit` are taken.
    pub fn acquire(count: &'a AtomicUsize, limit: usize) -> Option<Slot<'a>> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(count))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What is followed.
pub trait Followed {
    /// The bytes that arrived since the last call, and whether the source is done (a byte
    /// limit reached). `None` when it cannot be read any more (the implementation logs why):
    /// the stream ends without its last chunk, so the client sees it was cut short.
    fn poll(&mut self) -> Option<(Vec<u8>, bool)>;
    /// Whether the source may still grow (the container still runs with this log); false
    /// ends the stream after one more look.
    fn goes_on(&mut self) -> bool;
    /// The server is stopping: end the stream now, properly.
    fn stopping(&self) -> bool;
}

/// How a follower paces itself.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// How long it waits for the client to hang up between looks at the source.
    pub tick: Duration,
    /// How long each write may take.
    pub write: Duration,
}

/// Streams `source` to `conn` under the head of `resp` (its status, type and headers; chunked
/// unless `chunked` is false, for an HTTP/1.0 client) until the source is done or stops
/// growing, the server stops (the stream ends properly), or the client hangs up. An error is
/// a client that went away mid-write.
pub fn follow<C: Conn, F: Followed>(
    conn: &mut C,
    resp: &Response,
    chunked: bool,
    source: &mut F,
    pace: Pace,
) -> io::Result<()> {
    conn.extend_deadline(pace.write);
    write_stream_head(conn, resp, chunked)?;
    let mut last_round = false;
    loop {
        let Some((bytes, done)) = source.poll() else {
            return Ok(());
        };
        if !bytes.is_empty() {
            conn.extend_deadline(pace.write);
            write_stream_data(conn, &bytes, chunked)?;
        }
        if done || last_round || source.stopping() {
            break;
        }
        if conn.client_gone(pace.tick) {
            return Ok(());
        }
        last_round = !source.goes_on();
    }
    if chunked {
        conn.extend_deadline(pace.write);
        write_last_chunk(conn)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_and_released() {
        let count = AtomicUsize::new(0);
        let a = Slot::acquire(&count, 2).expect("first");
        let b = Slot::acquire(&count, 2).expect("second");
        assert!(Slot::acquire(&count, 2).is_none());
        drop(a);
        let c = Slot::acquire(&count, 2).expect("after release");
        drop((b, c));
        assert_eq!(count.load(Ordering::SeqCst), 0);
    }
}
