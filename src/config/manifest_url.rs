//! config::manifest_url: podvisor's flags for the manifest URL's TLS (the kubelet has no
//! setting for them: its static pod URL trusts Go's system roots and presents no client
//! certificate) — `--manifest-url-ca-file` (trusted besides the system CA bundle),
//! `--manifest-url-client-cert` and `--manifest-url-client-key` (PEM, both or neither), so a
//! private fleet server can serve manifests over HTTPS and know which device asks. Flags, not
//! KubeletConfiguration fields: the file's schema is the kubelet's.

use std::path::PathBuf;

use super::checks::check_absolute;
use super::flags::invalid_flag;
use super::ConfigError;
use crate::httpclient::tls::ClientTls;
use crate::sources::TLS_FLAG_NAMES;

/// The manifest URL's TLS flags (flattened into `podvisor run`'s).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestUrlTlsFlags {
    /// PEM CA certificates trusted for --manifest-url besides the system bundle
    /// (/etc/ssl/certs/ca-certificates.crt).
    #[arg(long = "manifest-url-ca-file", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate presented to --manifest-url (with --manifest-url-client-key).
    #[arg(long = "manifest-url-client-cert", value_name = "FILE")]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of --manifest-url-client-cert.
    #[arg(long = "manifest-url-client-key", value_name = "FILE")]
    pub client_key: Option<PathBuf>,
}

impl ManifestUrlTlsFlags {
    /// The URL source's TLS settings; `has_url` says whether a manifest URL is configured
    /// (the flags mean nothing without one).
    pub fn resolve(&self, has_url: bool) -> Result<ClientTls, ConfigError> {
        let names = [
            "manifest-url-ca-file",
            "manifest-url-client-cert",
            "manifest-url-client-key",
        ];
        for (name, v) in names
            .iter()
            .zip([&self.ca_file, &self.client_cert, &self.client_key])
        {
            if let Some(p) = v {
                let shown = p.display().to_string();
                check_absolute(p).map_err(|m| invalid_flag(name, &shown, m.to_string()))?;
                if !has_url {
                    return Err(invalid_flag(
                        name,
                        &shown,
                        "no manifest URL is configured (--manifest-url or staticPodURL)",
                    ));
                }
            }
        }
        match (&self.client_cert, &self.client_key) {
            (Some(c), None) => {
                return Err(invalid_flag(
                    "manifest-url-client-cert",
                    &c.display().to_string(),
                    "needs --manifest-url-client-key",
                ))
            }
            (None, Some(k)) => {
                return Err(invalid_flag(
                    "manifest-url-client-key",
                    &k.display().to_string(),
                    "needs --manifest-url-client-cert",
                ))
            }
            _ => {}
        }
        Ok(ClientTls {
            ca_file: self.ca_file.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            names: TLS_FLAG_NAMES,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_paths_and_a_url_are_required() {
        let p = |s: &str| Some(PathBuf::from(s));
        let ok = ManifestUrlTlsFlags {
            ca_file: p("/etc/fleet/ca.crt"),
            client_cert: p("/etc/fleet/node.crt"),
            client_key: p("/etc/fleet/node.key"),
        };
        let tls = ok.resolve(true).expect("ok");
        assert_eq!(tls.ca_file, p("/etc/fleet/ca.crt"));
        assert_eq!(tls.names[0], "--manifest-url-ca-file");
        assert!(ok
            .resolve(false)
            .expect_err("no url")
            .to_string()
            .contains("no manifest URL"));
        for (bad, want) in [
            (
                ManifestUrlTlsFlags {
                    client_cert: p("/c"),
                    ..Default::default()
                },
                "needs --manifest-url-client-key",
            ),
            (
                ManifestUrlTlsFlags {
                    client_key: p("/k"),
                    ..Default::default()
                },
                "needs --manifest-url-client-cert",
            ),
            (
                ManifestUrlTlsFlags {
                    ca_file: p("ca.crt"),
                    ..Default::default()
                },
                "manifest-url-ca-file",
            ),
        ] {
            let e = bad.resolve(true).expect_err(want).to_string();
            assert!(e.contains(want), "{e}");
        }
        assert_eq!(
            ManifestUrlTlsFlags::default().resolve(false).expect("none"),
            ClientTls {
                names: TLS_FLAG_NAMES,
                ..Default::default()
            }
        );
    }
}
