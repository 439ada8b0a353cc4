//! nodeapi::tls: the secure port's rustls configuration, on the same `ring` provider the
//! registry client links (no second crypto provider):
//!
//! - the serving certificate: `tlsCertFile`/`tlsPrivateKeyFile`, or, as the kubelet does
//!   without them, a self-signed one generated at first start and kept as
//!   `<root-dir>/pki/kubelet.crt` and `kubelet.key` (ECDSA P-256, the node name, `localhost`,
//!   127.0.0.1 and ::1 as names; valid ten years, so an unattended node's scrapes do not
//!   break after one, the kubelet's term);
//! - `tlsMinVersion` (`VersionTLS12`, `VersionTLS13`; rustls has no TLS 1.0/1.1, so
//!   `VersionTLS10` and `VersionTLS11` are refused rather than silently raised);
//! - `tlsCipherSuites` with Go's names: the TLS 1.2 suites allowed (as in Go, TLS 1.3's
//!   suites are not configurable and stay on);
//! - client certificates verified against `authentication.x509.clientCAFile` when it is set,
//!   optional (a client without one may still bring a bearer token).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::ring::cipher_suite as cs;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Errors building the TLS configuration, each naming the field or file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tlsMinVersion: {value:?} is not supported (VersionTLS12 or VersionTLS13; rustls implements no TLS 1.0 or 1.1)")]
    MinVersion { value: String },
    #[error("tlsCipherSuites: {name:?} is not a TLS 1.2 cipher suite podvisor supports (supported: {supported})")]
    CipherSuite { name: String, supported: String },
    #[error("tlsCertFile and tlsPrivateKeyFile must be set together")]
    HalfPair,
    #[error("cannot read {what} {path}: {message}")]
    Pem {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("cannot generate the self-signed serving certificate: {message}")]
    Generate { message: String },
    #[error("cannot write {path}")]
    Write { path: PathBuf, source: io::Error },
    #[error("the serving certificate {cert} and key do not form a usable pair: {message}")]
    Pair { cert: PathBuf, message: String },
    #[error("authentication.x509.clientCAFile {path}: {message}")]
    ClientCa { path: PathBuf, message: String },
}

/// The lowest TLS version served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

/// Parses `tlsMinVersion` (Go's constant names; "" is the default, TLS 1.2).
pub fn parse_min_version(v: &str) -> Result<MinVersion, TlsError> {
    match v {
        "" | "VersionTLS12" => Ok(MinVersion::Tls12),
        "VersionTLS13" => Ok(MinVersion::Tls13),
        _ => Err(TlsError::MinVersion { value: v.into() }),
    }
}

/// Go's names of the TLS 1.2 suites the ring provider implements.
const SUITES: [(&str, SupportedCipherSuite); 6] = [
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// Checks `tlsCipherSuites` names (Go's, plus its `..._POLY1305` aliases).
pub fn check_cipher_suites(names: &[String]) -> Result<(), TlsError> {
    names.iter().try_for_each(|n| suite(n).map(|_| ()))
}

fn suite(name: &str) -> Result<SupportedCipherSuite, TlsError> {
    let canonical = match name {
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        n => n,
    };
    SUITES
        .iter()
        .find(|(n, _)| *n == canonical)
        .map(|(_, s)| *s)
        .ok_or_else(|| TlsError::CipherSuite {
            name: name.into(),
            supported: SUITES.map(|(n, _)| n).join(", "),
        })
}

/// What the TLS configuration is built from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSettings {
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Where the self-signed pair is kept (`<root-dir>/pki`).
    pub generated_dir: PathBuf,
    /// Names of the self-signed certificate besides localhost and the loopback addresses.
    pub node_name: String,
    pub min_version: MinVersion,
    /// Go names of the allowed TLS 1.2 suites; empty: all of them.
    pub cipher_suites: Vec<String>,
    pub client_ca_file: Option<PathBuf>,
}

/// The ring provider with only the allowed suites.
fn provider(s: &TlsSettings) -> Result<CryptoProvider, TlsError> {
    let mut p = rustls::crypto::ring::default_provider();
    if !s.cipher_suites.is_empty() {
        let allowed = s
            .cipher_suites
            .iter()
            .map(|n| suite(n))
            .collect::<Result<Vec<_>, _>>()?;
        p.cipher_suites.retain(|c| {
            c.version() == &rustls::version::TLS13 || allowed.iter().any(|a| a.suite() == c.suite())
        });
    }
    Ok(p)
}

fn pem_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl Fn(rustls_pki_types::pem::Error) -> TlsError + 'a {
    move |e| TlsError::Pem {
        what,
        path: path.to_owned(),
        message: e.to_string(),
    }
}

fn load_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem_err(what, path))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_err(what, path))?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what,
            path: path.to_owned(),
            message: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

/// The serving certificate and key files: the configured ones, or the self-signed pair in
/// `generated_dir` (created when missing).
pub fn serving_files(s: &TlsSettings) -> Result<(PathBuf, PathBuf), TlsError> {
    match (&s.cert_file, &s.key_file) {
        (Some(c), Some(k)) => Ok((c.clone(), k.clone())),
        (None, None) => {
            let cert = s.generated_dir.join("kubelet.crt");
            let key = s.generated_dir.join("kubelet.key");
            if !(cert.exists() && key.exists()) {
                generate_self_signed(&s.node_name, &cert, &key)?;
                log::info!(
                    "generated the self-signed serving certificate {}",
                    cert.display()
                );
            }
            Ok((cert, key))
        }
        _ => Err(TlsError::HalfPair),
    }
}

fn generate_self_signed(node_name: &str, cert: &Path, key: &Path) -> Result<(), TlsError> {
    let gen_err = |e: rcgen::Error| TlsError::Generate {
        message: e.to_string(),
    };
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !node_name.is_empty() {
        names.insert(0, node_name.to_string());
    }
    let mut params = rcgen::CertificateParams::new(names).map_err(gen_err)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{node_name}@podvisor"));
    let year = 1970
        + (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
            / 31_556_952) as i32;
    params.not_before = rcgen::date_time_ymd(year, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
    let key_pair = rcgen::KeyPair::generate().map_err(gen_err)?;
    let c = params.self_signed(&key_pair).map_err(gen_err)?;
    let dir = cert.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| TlsError::Write {
            path: dir.to_owned(),
            source,
        })?;
    // The key first: a certificate without its key would be taken as a pair next time.
    crate::fsutil::write_atomic(key, key_pair.serialize_pem().as_bytes()).map_err(|source| {
        TlsError::Write {
            path: key.to_owned(),
            source,
        }
    })?;
    crate::fsutil::write_atomic(cert, c.pem().as_bytes()).map_err(|source| TlsError::Write {
        path: cert.to_owned(),
        source,
    })
}

/// The rustls server configuration of the secure port.
pub fn server_config(s: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(provider(s)?);
    let versions: &[&rustls::SupportedProtocolVersion] = match s.min_version {
        MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let (cert_path, key_path) = serving_files(s)?;
    let certs = load_certs("tlsCertFile", &cert_path)?;
    let key =
        PrivateKeyDer::from_pem_file(&key_path).map_err(pem_err("tlsPrivateKeyFile", &key_path))?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| TlsError::Pair {
            cert: cert_path.clone(),
            message: e.to_string(),
        })?;
    let builder = match &s.client_ca_file {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in load_certs("authentication.x509.clientCAFile", ca)? {
                roots.add(c).map_err(|e| TlsError::ClientCa {
                    path: ca.clone(),
                    message: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::ClientCa {
                    path: ca.clone(),
                    message: e.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Pair {
            cert: cert_path,
            message: e.to_string(),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The subject CN and O values of a DER certificate (the user and groups of a client
/// certificate, as the API server reads them); `None` when it cannot be parsed.
pub fn subject_cn_and_orgs(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (cert, _) = der_element(der, 0x30)?;
    let (tbs, _) = der_element(cert, 0x30)?;
    let mut rest = tbs;
    // [0] version, optional.
    if rest.first() == Some(&0xa0) {
        rest = der_element(rest, 0xa0)?.1;
    }
    for tag in [0x02, 0x30, 0x30, 0x30] {
        // serial, signature algorithm, issuer, validity
        rest = der_element(rest, tag)?.1;
    }
    let (mut name, _) = der_element(rest, 0x30)?;
    let (mut cn, mut orgs) = (String::new(), Vec::new());
    while !name.is_empty() {
        let (set, after) = der_element(name, 0x31)?;
        name = after;
        let mut attrs = set;
        while !attrs.is_empty() {
            let (atv, after) = der_element(attrs, 0x30)?;
            attrs = after;
            let (oid, value) = der_element(atv, 0x06)?;
            let tag = *value.first()?;
            let (text, _) = der_element(value, tag)?;
            let text = String::from_utf8_lossy(text).into_owned();
            match oid {
                [0x55, 0x04, 0x03] => cn = text,
                [0x55, 0x04, 0x0a] => orgs.push(text),
                _ => {}
            }
        }
    }
    Some((cn, orgs))
}

/// The content of the DER element at the start of `b` (which must have `tag`), and what
/// follows it.
fn der_element(b: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *b.first()? != tag {
        return None;
    }
    let first = *b.get(1)? as usize;
    let (len, start) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *b.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let end = start.checked_add(len)?;
    Some((b.get(start..end)?, b.get(end..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_versions_and_suites() {
        assert_eq!(parse_min_version("").expect("default"), MinVersion::Tls12);
        assert_eq!(
            parse_min_version("VersionTLS13").expect("1.3"),
            MinVersion::Tls13
        );
        let e = parse_min_version("VersionTLS10").expect_err("1.0");
        assert!(e.to_string().contains("no TLS 1.0 or 1.1"), "{e}");
        check_cipher_suites(&[
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305".into(),
        ])
        .expect("known");
        let e = check_cipher_suites(&["TLS_RSA_WITH_AES_128_CBC_SHA".into()]).expect_err("cbc");
        assert!(
            e.to_string()
                .starts_with("tlsCipherSuites: \"TLS_RSA_WITH_AES_128_CBC_SHA\" is not"),
            "{e}"
        );
    }

    #[test]
    fn self_signed_pair_is_generated_once_and_names_the_node() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = TlsSettings {
            generated_dir: dir.path().join("pki"),
            node_name: "edge-1".into(),
            ..Default::default()
        };
        server_config(&s).expect("config");
        let (cert, key) = serving_files(&s).expect("files");
        let first = std::fs::read(&cert).expect("cert");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).expect("key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        server_config(&s).expect("again");
        assert_eq!(
            std::fs::read(&cert).expect("cert"),
            first,
            "kept, not regenerated"
        );
        let der = CertificateDer::from_pem_file(&cert).expect("pem");
        assert_eq!(
            subject_cn_and_orgs(&der),
            Some(("edge-1@podvisor".into(), vec![]))
        );
        let half = TlsSettings {
            cert_file: Some(cert),
            ..s
        };
        assert!(matches!(server_config(&half), Err(TlsError::HalfPair)));
    }

    #[test]
    fn der_walker_refuses_garbage() {
        assert_eq!(subject_cn_and_orgs(b""), None);
        assert_eq!(subject_cn_and_orgs(&[0x30, 0x85, 1, 2, 3, 4, 5]), None);
        assert_eq!(subject_cn_and_orgs(&[0x30, 0x05, 0x30, 0x03]), None);
    }
}
