//! Registry test harness: Debian's `docker-registry` (CNCF distribution) started on a free
//! loopback port with a temporary storage directory (optionally with an htpasswd file),
//! test images written as OCI layouts and pushed with `skopeo`, and a tiny_http proxy that
//! forwards to the registry while injecting faults (statuses, resets, truncation, wrong
//! bytes, throttling) and recording the requests it saw.
#![allow(dead_code)]

use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::image::sha256_hex;

pub const USER: &str = "tester";
pub const PASSWORD: &str = "s3cret-pw";

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A running `docker-registry`, killed and its storage removed on drop.
pub struct Registry {
    pub addr: String,
    child: Child,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry; with `htpasswd` it requires Basic auth as USER/PASSWORD.
    pub fn start(htpasswd: bool) -> Registry {
        let mut dir = tempfile::Builder::new()
            .prefix("podvisor-registry-")
            .tempdir()
            .expect("tempdir");
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let addr = format!("127.0.0.1:{port}");
            let mut cfg = format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
                dir.path().join("data").display()
            );
            if htpasswd {
                let out = Command::new("htpasswd")
                    .args(["-Bbn", USER, PASSWORD])
                    .output()
                    .expect("htpasswd (apt-get install apache2-utils)");
                assert!(out.status.success(), "htpasswd failed");
                let pw = dir.path().join("htpasswd");
                fs::write(&pw, &out.stdout).expect("write htpasswd");
                cfg.push_str(&format!(
                    "auth:\n  htpasswd:\n    realm: test-realm\n    path: {}\n",
                    pw.display()
                ));
            }
            let cfg_path = dir.path().join("config.yml");
            fs::write(&cfg_path, cfg).expect("write config");
            let log = fs::File::create(dir.path().join("registry.log")).expect("log");
            let child = Command::new("/usr/bin/docker-registry")
                .arg("serve")
                .arg(&cfg_path)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log fd"))
                .stderr(log)
                .spawn()
                .expect("start /usr/bin/docker-registry (apt-get install docker-registry)");
            let mut reg = Registry {
                addr: addr.clone(),
                child,
                dir,
            };
            if reg.wait_ready() {
                return reg;
            }
            last = fs::read_to_string(reg.dir.path().join("registry.log")).unwrap_or_default();
            let _ = reg.child.kill();
            let _ = reg.child.wait();
            // Reuse the directory for the next try.
            dir = std::mem::replace(
                &mut reg.dir,
                tempfile::tempdir().expect("placeholder tempdir"),
            );
        }
        panic!("docker-registry did not start: {last}");
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if std::net::TcpStream::connect(&self.addr).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Pushes `layout:tag` to `repo:tag` on this registry with skopeo (`all`: every image of
    /// an index).
    pub fn push(&self, layout: &Path, tag: &str, repo_tag: &str, all: bool) {
        self.push_with(layout, tag, repo_tag, all, &["--preserve-digests"]);
    }

    /// [`Registry::push`] with other skopeo flags (e.g. `--format v2s2` to convert to Docker
    /// schema 2 manifests and manifest lists; digests then change).
    pub fn push_with(&self, layout: &Path, tag: &str, repo_tag: &str, all: bool, flags: &[&str]) {
        let mut c = Command::new("skopeo");
        c.arg("copy")
            .arg("--quiet")
            .args(flags)
            .arg("--dest-tls-verify=false");
        if all {
            c.arg("--all");
        }
        c.arg(format!("--dest-creds={USER}:{PASSWORD}"))
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{repo_tag}", self.addr));
        let out = c.output().expect("skopeo");
        assert!(
            out.status.success(),
            "skopeo copy to {repo_tag} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A layer blob with its diff_id and media type.
#[derive(Clone)]
pub struct Layer {
    pub blob: Vec<u8>,
    pub diff_id: String,
    pub media_type: &'static str,
}

#[derive(Clone, Copy)]
pub enum Comp {
    Plain,
    Gzip,
    Zstd,
}

/// A layer holding `files` (path, content), compressed as asked.
pub fn layer(files: &[(&str, Vec<u8>)], comp: Comp) -> Layer {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_mtime(1_700_000_000);
        b.append_data(&mut h, name, data.as_slice()).expect("tar");
    }
    let tar = b.into_inner().expect("tar");
    let diff_id = format!("sha256:{}", sha256_hex(&tar));
    let (blob, media_type) = match comp {
        Comp::Plain => (tar, "application/vnd.oci.image.layer.v1.tar"),
        Comp::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&tar).expect("gzip");
            (
                gz.finish().expect("gzip"),
                "application/vnd.oci.image.layer.v1.tar+gzip",
            )
        }
        Comp::Zstd => (
            zstd::encode_all(tar.as_slice(), 3).expect("zstd"),
            "application/vnd.oci.image.layer.v1.tar+zstd",
        ),
    };
    Layer {
        blob,
        diff_id,
        media_type,
    }
}

/// Deterministic incompressible bytes.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// One platform image: manifest, config and layers.
#[derive(Clone)]
pub struct TestImage {
    pub arch: String,
    pub manifest: Vec<u8>,
    pub config: Vec<u8>,
    pub layers: Vec<Layer>,
}

impl TestImage {
    pub fn digest(&self) -> String {
        format!("sha256:{}", sha256_hex(&self.manifest))
    }
}

pub fn image(arch: &str, layers: Vec<Layer>) -> TestImage {
    let config = serde_json::json!({
        "architecture": arch,
        "os": "linux",
        "created": "2024-01-01T00:00:00Z",
        "config": {"Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.diff_id.clone()).collect::<Vec<_>>()}
    });
    let config = serde_json::to_vec(&config).expect("json");
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": format!("sha256:{}", sha256_hex(&config)),
            "size": config.len()
        },
        "layers": layers.iter().map(|l| serde_json::json!({
            "mediaType": l.media_type,
            "digest": format!("sha256:{}", sha256_hex(&l.blob)),
            "size": l.blob.len()
        })).collect::<Vec<_>>()
    });
    TestImage {
        arch: arch.to_string(),
        manifest: serde_json::to_vec(&manifest).expect("json"),
        config,
        layers,
    }
}

/// Writes an OCI layout at `dir` whose `tag` names `images[0]` alone, or an index of all of
/// them (with platforms) when there are several. Returns the top digest.
pub fn write_layout(dir: &Path, tag: &str, images: &[TestImage]) -> String {
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).expect("layout dir");
    let put = |data: &[u8]| {
        let hex = sha256_hex(data);
        fs::write(blobs.join(&hex), data).expect("write blob");
        format!("sha256:{hex}")
    };
    for img in images {
        put(&img.manifest);
        put(&img.config);
        for l in &img.layers {
            put(&l.blob);
        }
    }
    let (mt, digest, size) = if let [one] = images {
        (
            "application/vnd.oci.image.manifest.v1+json",
            one.digest(),
            one.manifest.len(),
        )
    } else {
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": images.iter().map(|i| serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": i.digest(),
                "size": i.manifest.len(),
                "platform": {"architecture": i.arch, "os": "linux"}
            })).collect::<Vec<_>>()
        });
        let bytes = serde_json::to_vec(&index).expect("json");
        let d = put(&bytes);
        ("application/vnd.oci.image.index.v1+json", d, bytes.len())
    };
    let top = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": mt,
            "digest": digest,
            "size": size,
            "annotations": {"org.opencontainers.image.ref.name": tag}
        }]
    });
    fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).expect("layout");
    fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&top).expect("json"),
    )
    .expect("index");
    digest
}

/// Writes an OCI archive (tar of a layout) for `images[0]` named `reference`.
pub fn write_archive(out: &Path, reference: &str, img: &TestImage) {
    let dir = tempfile::tempdir().expect("tempdir");
    write_layout(dir.path(), reference, std::slice::from_ref(img));
    let st = Command::new("tar")
        .arg("-C")
        .arg(dir.path())
        .arg("-cf")
        .arg(out)
        .arg(".")
        .status()
        .expect("tar");
    assert!(st.success());
}

/// One request the proxy saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub url: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
}

/// What the proxy does with one request.
pub enum Fault {
    /// Forward unchanged.
    Pass,
    /// Answer this status (with an optional Retry-After) without forwarding.
    Status(u16, Option<u64>),
    /// Forward, but cut the body after this many bytes (connection closed).
    CutAfter(usize),
    /// Forward with one byte of the body flipped.
    Corrupt,
    /// Forward at about this many bytes per second.
    Throttle(usize),
    /// Answer 200 with this body and content type.
    Body(Vec<u8>, String),
}

type Rule = dyn Fn(&Seen, usize) -> Fault + Send + Sync;

/// A fault-injecting HTTP proxy in front of `upstream`.
pub struct FaultProxy {
    pub addr: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

/// A body reader that fails after `limit` bytes or flips a byte or sleeps to throttle.
struct FaultyBody {
    inner: Box<dyn Read + Send>,
    sent: usize,
    cut: Option<usize>,
    corrupt_at: Option<usize>,
    rate: Option<usize>,
    started: Instant,
}

impl Read for FaultyBody {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut want = buf.len().min(16 << 10);
        if let Some(c) = self.cut {
            if self.sent >= c {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "injected cut",
                ));
            }
            want = want.min(c - self.sent);
        }
        if let Some(rate) = self.rate {
            let due = Duration::from_secs_f64(self.sent as f64 / rate as f64);
            let el = self.started.elapsed();
            if due > el {
                std::thread::sleep(due - el);
            }
            want = want.min(8 << 10);
        }
        let n = self.inner.read(&mut buf[..want])?;
        if let Some(at) = self.corrupt_at {
            if at >= self.sent && at < self.sent + n {
                buf[at - self.sent] ^= 0xff;
            }
        }
        self.sent += n;
        Ok(n)
    }
}

impl FaultProxy {
    pub fn start(
        upstream: &str,
        rule: impl Fn(&Seen, usize) -> Fault + Send + Sync + 'static,
    ) -> FaultProxy {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("proxy bind"));
        let addr = server.server_addr().to_ip().expect("ip addr").to_string();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::new(Mutex::new(Vec::new()));
        let rule: Arc<Rule> = Arc::new(rule);
        let upstream = upstream.to_string();
        let (s2, seen2) = (server.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .build()
                .new_agent();
            for req in s2.incoming_requests() {
                let h = |name: &'static str| {
                    req.headers()
                        .iter()
                        .find(|x| x.field.equiv(name))
                        .map(|x| x.value.as_str().to_string())
                };
                let s = Seen {
                    method: req.method().as_str().to_string(),
                    url: req.url().to_string(),
                    range: h("Range"),
                    authorization: h("Authorization"),
                };
                let n = {
                    let mut v = seen2.lock().expect("seen");
                    v.push(s.clone());
                    v.len() - 1
                };
                let fault = rule(&s, n);
                let agent = agent.clone();
                let upstream = upstream.clone();
                // One thread per request: layers are downloaded concurrently.
                std::thread::spawn(move || serve(req, s, fault, &agent, &upstream));
            }
        });
        FaultProxy {
            addr,
            seen,
            server,
            thread: Some(thread),
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }
}

fn serve(req: tiny_http::Request, s: Seen, fault: Fault, agent: &ureq::Agent, upstream: &str) {
    let header = |k: &str, v: &str| {
        tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header")
    };
    match fault {
        Fault::Status(code, retry_after) => {
            let mut r = tiny_http::Response::from_string("injected").with_status_code(code);
            if let Some(ra) = retry_after {
                r.add_header(header("Retry-After", &ra.to_string()));
            }
            let _ = req.respond(r);
            return;
        }
        Fault::Body(body, ct) => {
            let d = format!("sha256:{}", sha256_hex(&body));
            let r = tiny_http::Response::from_data(body)
                .with_header(header("Content-Type", &ct))
                .with_header(header("Docker-Content-Digest", &d));
            let _ = req.respond(r);
            return;
        }
        _ => {}
    }
    let mut up = agent.get(format!("http://{upstream}{}", s.url));
    for hname in ["Accept", "Range", "Authorization", "Accept-Encoding"] as [&'static str; 4] {
        if let Some(v) = req
            .headers()
            .iter()
            .find(|x| x.field.equiv(hname))
            .map(|x| x.value.as_str().to_string())
        {
            up = up.header(hname, v);
        }
    }
    let resp = match up.call() {
        Ok(r) => r,
        Err(_) => {
            let _ = req.respond(tiny_http::Response::empty(502));
            return;
        }
    };
    let status = resp.status().as_u16();
    let mut headers = Vec::new();
    let mut len = None;
    for (k, v) in resp.headers() {
        let v = v.to_str().unwrap_or("");
        match k.as_str() {
            "content-length" => len = v.parse::<usize>().ok(),
            "content-type"
            | "content-range"
            | "docker-content-digest"
            | "www-authenticate"
            | "location"
            | "accept-ranges" => headers.push(header(k.as_str(), v)),
            _ => {}
        }
    }
    let mut body = FaultyBody {
        inner: Box::new(resp.into_body().into_reader()),
        sent: 0,
        cut: None,
        corrupt_at: None,
        rate: None,
        started: Instant::now(),
    };
    match fault {
        Fault::CutAfter(n) => body.cut = Some(n),
        Fault::Corrupt => body.corrupt_at = Some(len.unwrap_or(1) / 2),
        Fault::Throttle(r) => body.rate = Some(r),
        _ => {}
    }
    let r = tiny_http::Response::new(tiny_http::StatusCode(status), headers, body, len, None);
    let _ = req.respond(r);
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A registries.yaml making `registry` reachable over plain http at `endpoint`.
pub fn registries_yaml(dir: &Path, registry: &str, endpoint: &str, auth: bool) -> PathBuf {
    let mut y = format!("mirrors:\n  \"{registry}\":\n    endpoint: [\"http://{endpoint}\"]\n");
    if auth {
        y.push_str(&format!(
            "configs:\n  \"{endpoint}\":\n    auth: {{username: {USER}, password: {PASSWORD}}}\n"
        ));
    }
    let p = dir.join(format!("registries-{}.yaml", free_port()));
    fs::write(&p, y).expect("write registries.yaml");
    p
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
pub struct Tmpfs {
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("podvisor-tmpfs-")
            .tempdir()
            .expect("tempdir");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount");
        assert!(st.success(), "mount tmpfs");
        Tmpfs { dir }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
