//! The building block against each hostile behaviour, with a plain agent: every one ends in a
//! named error, within the deadlines.

use super::hostile::{Hostile, Server};
use super::*;

/// Short deadlines, so slowloris cases end quickly; a 1 MiB body limit.
const TEST_LIMITS: Limits = Limits {
    max_body: 1 << 20,
    max_head: 16 << 10,
    max_redirects: 3,
    connect: Duration::from_secs(5),
    head: Duration::from_millis(700),
    body: Duration::from_millis(700),
    total: Duration::from_secs(20),
};

fn get(server: &Server, limits: &Limits) -> Result<Vec<u8>, HttpError> {
    let agent: Agent = limits.agent_config().build().new_agent();
    let mut resp = agent
        .get(server.url("/x"))
        .call()
        .map_err(|e| limits.error(e))?;
    read_body(resp.body_mut(), limits)
}

fn serving(h: Hostile) -> Server {
    Server::start(move |_| h.clone())
}

#[test]
fn gzip_bomb_stops_at_the_decoded_limit() {
    let err = get(&serving(Hostile::GzipBomb), &TEST_LIMITS).expect_err("bomb");
    assert_eq!(err, HttpError::BodyTooLarge { limit: 1 << 20 });
    assert!(err.to_string().contains("after decompression"), "{err}");
}

#[test]
fn endless_body_is_too_large() {
    let err = get(&serving(Hostile::EndlessBody), &TEST_LIMITS).expect_err("endless");
    assert_eq!(err, HttpError::BodyTooLarge { limit: 1 << 20 });
}

#[test]
fn slowloris_head_hits_the_head_deadline() {
    let err = get(&serving(Hostile::SlowHead), &TEST_LIMITS).expect_err("slow head");
    assert_eq!(
        err,
        HttpError::Timeout {
            phase: Phase::Head,
            after: TEST_LIMITS.head
        }
    );
    assert_eq!(
        err.to_string(),
        "timed out after 700ms receiving the response headers"
    );
}

#[test]
fn trickled_body_hits_the_body_deadline() {
    let err = get(&serving(Hostile::TrickleBody), &TEST_LIMITS).expect_err("trickle");
    assert_eq!(
        err,
        HttpError::Timeout {
            phase: Phase::Body,
            after: TEST_LIMITS.body
        }
    );
}

#[test]
fn total_deadline_covers_head_and_body_together() {
    // Each phase alone would allow 10 s; the whole exchange is allowed 800 ms.
    let limits = Limits {
        head: Duration::from_secs(10),
        body: Duration::from_secs(10),
        total: Duration::from_millis(800),
        ..TEST_LIMITS
    };
    for h in [Hostile::SlowHead, Hostile::TrickleBody] {
        let err = get(&serving(h.clone()), &limits).expect_err("slow");
        assert_eq!(
            err,
            HttpError::Timeout {
                phase: Phase::Total,
                after: limits.total
            },
            "{h:?}"
        );
    }
}

#[test]
fn huge_head_is_refused() {
    let err = get(&serving(Hostile::HugeHead), &TEST_LIMITS).expect_err("huge head");
    assert_eq!(err, HttpError::HeadTooLarge { limit: 16 << 10 });
}

#[test]
fn redirect_loop_is_refused() {
    let err = get(&serving(Hostile::RedirectLoop), &TEST_LIMITS).expect_err("loop");
    assert_eq!(err, HttpError::TooManyRedirects { max: 3 });
}

#[test]
fn bodies_at_and_below_the_limit_are_read_whole() {
    for len in [0usize, 1, 1 << 20] {
        let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let server = serving(Hostile::Reply {
            status: 200,
            headers: Vec::new(),
            body: body.clone(),
        });
        assert_eq!(get(&server, &TEST_LIMITS).expect("body"), body, "{len}");
    }
    let server = serving(Hostile::Reply {
        status: 200,
        headers: Vec::new(),
        body: vec![b'x'; (1 << 20) + 1],
    });
    assert_eq!(
        get(&server, &TEST_LIMITS),
        Err(HttpError::BodyTooLarge { limit: 1 << 20 })
    );
}

#[test]
fn gzip_body_within_the_limit_is_decoded() {
    let text = b"hello ".repeat(1000);
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, &text).expect("gzip");
    let server = serving(Hostile::Reply {
        status: 200,
        headers: vec![("Content-Encoding".into(), "gzip".into())],
        body: enc.finish().expect("gzip"),
    });
    assert_eq!(get(&server, &TEST_LIMITS).expect("gzip body"), text);
}

#[test]
fn empty_gzip_members_hit_the_wire_limit() {
    // Decodes to nothing, forever: only the wire cap ends it.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, b"").expect("gzip");
    let member = enc.finish().expect("gzip");
    let limits = Limits {
        max_body: 1024,
        ..TEST_LIMITS
    };
    let server = serving(Hostile::Reply {
        status: 200,
        headers: vec![("Content-Encoding".into(), "gzip".into())],
        body: member.repeat(usize::try_from(wire_limit(1024)).expect("fits") / member.len() + 1),
    });
    assert_eq!(
        get(&server, &limits),
        Err(HttpError::BodyTooLarge { limit: 1024 })
    );
}

#[test]
fn bounded_reader_streams_up_to_the_limit() {
    let mut out = Vec::new();
    let n = bounded(&b"abcdef"[..], 6)
        .read_to_end(&mut out)
        .expect("exactly the limit");
    assert_eq!((n, out.as_slice()), (6, &b"abcdef"[..]));
    let err = bounded(&b"abcdefg"[..], 6)
        .read_to_end(&mut Vec::new())
        .expect_err("one byte over");
    assert_eq!(
        TEST_LIMITS.io_error(err),
        HttpError::BodyTooLarge { limit: 6 }
    );
}
