mod socket;

use super::*;

fn pod(ns: Option<&str>, name: &str) -> PodRef {
    PodRef {
        namespace: ns.map(str::to_string),
        name: name.to_string(),
    }
}

#[test]
fn parse_request_valid_routes() {
    let logs = |container: Option<&str>, previous, tail, follow| {
        ApiRequest::Logs(LogRequest {
            pod: pod(Some("default"), "web-n1"),
            container: container.map(str::to_string),
            previous,
            tail,
            follow,
        })
    };
    let cases: Vec<(&str, ApiRequest)> = vec![
        ("/healthz", ApiRequest::Healthz),
        ("/pods", ApiRequest::ListPods),
        ("/pods?", ApiRequest::ListPods),
        ("/pods/etcd", ApiRequest::GetPod(pod(None, "etcd"))),
        (
            "/pods/kube-system/etcd-n1",
            ApiRequest::GetPod(pod(Some("kube-system"), "etcd-n1")),
        ),
        (
            "/pods/kube%2Dsystem/etcd%20x",
            ApiRequest::GetPod(pod(Some("kube-system"), "etcd x")),
        ),
        ("/pods/a+b", ApiRequest::GetPod(pod(None, "a+b"))),
        ("/events", ApiRequest::Events { pod: None }),
        ("/events?pod=", ApiRequest::Events { pod: None }),
        (
            "/events?pod=kube-system%2Fetcd",
            ApiRequest::Events {
                pod: Some("kube-system/etcd".into()),
            },
        ),
        (
            "/events?pod=a+b",
            ApiRequest::Events {
                pod: Some("a b".into()),
            },
        ),
        ("/source-errors", ApiRequest::SourceErrors),
        ("/node", ApiRequest::Node),
        ("/pods/default/web-n1/log", logs(None, false, None, false)),
        (
            "/pods/default/web-n1/log?container=app&tail=10&follow=true",
            logs(Some("app"), false, Some(10), true),
        ),
        (
            "/pods/default/web-n1/log?previous=true&tail=-1&follow=false",
            logs(None, true, None, false),
        ),
        (
            "/pods/default/web-n1/log?tail=0",
            logs(None, false, Some(0), false),
        ),
    ];
    for (url, want) in cases {
        assert_eq!(parse_request("GET", url).expect(url), want, "{url}");
    }
}

#[test]
fn parse_request_invalid() {
    let cases: Vec<(&str, &str, u16, &str)> = vec![
        ("POST", "/pods", 405, "method POST is not allowed, only GET"),
        ("HEAD", "/healthz", 405, "method HEAD is not allowed"),
        ("GET", "/", 404, "no such resource /"),
        ("GET", "pods", 404, "no such resource pods"),
        ("GET", "/pods/", 404, "no such resource /pods/"),
        ("GET", "//pods", 404, "no such resource //pods"),
        ("GET", "/nodes", 404, "no such resource /nodes"),
        ("GET", "/pods/a/b/c", 404, "no such resource /pods/a/b/c"),
        ("GET", "/pods/a/b/log/x", 404, "no such resource"),
        ("GET", "/pods/a%zz", 400, "invalid percent escape \"%zz\""),
        ("GET", "/pods/a%2", 400, "invalid percent escape \"%2\""),
        ("GET", "/pods/%ff%fe", 400, "do not decode to UTF-8"),
        ("GET", "/pods?x=1", 400, "unknown parameter \"x\""),
        (
            "GET",
            "/healthz?verbose",
            400,
            "unknown parameter \"verbose\"",
        ),
        (
            "GET",
            "/events?pod=a&pod=b",
            400,
            "parameter \"pod\" repeated",
        ),
        ("GET", "/events?pod=%G1", 400, "query parameter pod"),
        (
            "GET",
            "/pods/d/p/log?tail=x",
            400,
            "query parameter tail: \"x\" is not a number",
        ),
        ("GET", "/pods/d/p/log?tail=-2", 400, "query parameter tail"),
        (
            "GET",
            "/pods/d/p/log?follow=yes",
            400,
            "query parameter follow: \"yes\" is not true or false",
        ),
        (
            "GET",
            "/pods/d/p/log?follow=true&previous=true",
            400,
            "only one of follow and previous",
        ),
        ("GET", "/pods/d/p/log?container=", 400, "container: empty"),
        (
            "GET",
            "/pods/d/p/log?since=1s",
            400,
            "unknown parameter \"since\"",
        ),
    ];
    for (method, url, status, msg) in cases {
        let err = parse_request(method, url).expect_err(url);
        assert_eq!(err.status(), status, "{method} {url}: {err}");
        assert!(err.to_string().contains(msg), "{method} {url}: {err}");
    }
}

#[test]
fn percent_encoding_round_trips() {
    for s in ["plain", "kube-system/etcd", "a b+c%d", "ünï", "x?y&z=#"] {
        let enc = percent_encode(s);
        assert!(enc
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
        assert_eq!(percent_decode(&enc, true).expect("decode"), s);
    }
}

#[test]
fn error_chain_joins_sources() {
    let err = ApiError::Bind {
        path: "/x.sock".into(),
        source: io::Error::new(io::ErrorKind::AddrInUse, "in use"),
    };
    assert_eq!(error_chain(&err), "cannot listen on /x.sock: in use");
}
