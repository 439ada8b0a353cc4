//! httpclient::tls: whom a client trusts and who it is, for every HTTPS client of podvisor
//! (the registry client, the manifest URL source, `podvisor apply`): the system CA bundle
//! (`/etc/ssl/certs/ca-certificates.crt`, Debian's ca-certificates, which `update-ca-certificates`
//! extends with local CAs) plus an optional CA file, the built-in WebPKI roots only when
//! neither exists; and an optional client certificate and key (PEM), for servers that
//! authenticate their clients. Bad files are errors naming the file.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

/// The system CA bundle (Debian's ca-certificates).
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A TLS file that cannot be used, naming what it is for and where it is.
#[derive(Debug, thiserror::Error)]
pub enum TlsFileError {
    #[error("reading {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{what} {path} holds no PEM certificate")]
    NoCertificate { what: &'static str, path: PathBuf },
    #[error("{what} {path} holds no PEM private key")]
    NoKey { what: &'static str, path: PathBuf },
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    fs::read(path).map_err(|source| TlsFileError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

fn certificates(pem: &[u8]) -> Vec<Certificate<'static>> {
    ureq::tls::parse_pem(pem)
        .filter_map(|i| match i {
            Ok(PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect()
}

/// The roots to trust: the system bundle (when present) and `ca_file` (`what` names it in
/// errors: `ca_file`, `--manifest-url-ca-file`...); WebPKI's built-in roots when there is
/// neither. A `ca_file` without a certificate is an error.
pub fn root_certs(ca_file: Option<&Path>, what: &'static str) -> Result<RootCerts, TlsFileError> {
    let system = fs::read(SYSTEM_CA_BUNDLE).ok();
    let extra = match ca_file {
        Some(p) => Some(read(what, p)?),
        None => None,
    };
    if system.is_none() && extra.is_none() {
        return Ok(RootCerts::WebPki);
    }
    let mut certs = Vec::new();
    if let Some(s) = &system {
        certs.extend(certificates(s));
    }
    if let (Some(p), Some(data)) = (ca_file, &extra) {
        let own = certificates(data);
        if own.is_empty() {
            return Err(TlsFileError::NoCertificate {
                what,
                path: p.to_path_buf(),
            });
        }
        certs.extend(own);
    }
    Ok(RootCerts::new_with_certs(&certs))
}

/// A client certificate (with its chain) and its private key, from PEM files.
pub fn client_identity(
    cert: &Path,
    key: &Path,
    what: (&'static str, &'static str),
) -> Result<ClientCert, TlsFileError> {
    let chain = certificates(&read(what.0, cert)?);
    if chain.is_empty() {
        return Err(TlsFileError::NoCertificate {
            what: what.0,
            path: cert.to_path_buf(),
        });
    }
    let key_pem = read(what.1, key)?;
    let key = ureq::tls::parse_pem(&key_pem)
        .find_map(|i| match i {
            Ok(PemItem::PrivateKey(k)) => Some(k),
            _ => None,
        })
        .map(|k: PrivateKey<'static>| k)
        .ok_or_else(|| TlsFileError::NoKey {
            what: what.1,
            path: key.to_path_buf(),
        })?;
    Ok(ClientCert::new_with_certs(&chain, key))
}

/// The TLS side of a client: an extra CA file, a client certificate and key (both or
/// neither), and the flag names to quote in errors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    pub ca_file: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// How the three are named in errors (flag names).
    pub names: [&'static str; 3],
}

impl ClientTls {
    /// The ureq TLS configuration.
    pub fn config(&self) -> Result<TlsConfig, TlsFileError> {
        let roots = root_certs(self.ca_file.as_deref(), self.names[0])?;
        let mut b = TlsConfig::builder().root_certs(roots);
        if let (Some(cert), Some(key)) = (&self.client_cert, &self.client_key) {
            b = b.client_cert(Some(client_identity(
                cert,
                key,
                (self.names[1], self.names[2]),
            )?));
        }
        Ok(b.build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 3] = ["--ca", "--cert", "--key"];

    #[test]
    fn files_are_checked_and_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let cert = rcgen::generate_simple_self_signed(vec!["client".into()]).expect("cert");
        std::fs::write(d.join("c.crt"), cert.cert.pem()).expect("w");
        std::fs::write(d.join("c.key"), cert.signing_key.serialize_pem()).expect("w");
        std::fs::write(d.join("junk"), "not pem\n").expect("w");
        let ok = ClientTls {
            ca_file: Some(d.join("c.crt")),
            client_cert: Some(d.join("c.crt")),
            client_key: Some(d.join("c.key")),
            names: NAMES,
        };
        let cfg = ok.config().expect("config");
        assert!(cfg.client_cert().is_some());
        let e = ClientTls {
            ca_file: Some(d.join("junk")),
            ..ok.clone()
        }
        .config()
        .expect_err("no ca");
        assert_eq!(
            e.to_string(),
            format!("--ca {} holds no PEM certificate", d.join("junk").display())
        );
        let e = ClientTls {
            client_key: Some(d.join("c.crt")),
            ..ok.clone()
        }
        .config()
        .expect_err("no key");
        assert!(e.to_string().starts_with("--key "), "{e}");
        let e = ClientTls {
            client_cert: Some(d.join("missing")),
            ..ok
        }
        .config()
        .expect_err("missing");
        assert!(e.to_string().starts_with("reading --cert "), "{e}");
    }
}
