//! config::server: the node API fields of the KubeletConfiguration — `healthzPort`,
//! `healthzBindAddress`, `readOnlyPort` (refused unless 0: the unauthenticated port stays
//! off), `enableServer`, `address`, `port`, `tlsCertFile`, `tlsPrivateKeyFile`,
//! `tlsMinVersion`, `tlsCipherSuites`, `authentication`, `authorization`,
//! `enableDebuggingHandlers` and `enableSystemLogHandler` — checked into
//! [`ServerFields`] and resolved with the kubelet's defaults and the `--token-auth-file` and
//! `--authorization-rules-file` flags by [`ServerFields::healthz_addr`] and
//! [`ServerFields::node_server`].
//!
//! Without an API server, `authentication.webhook` cannot review tokens (it is reported as not
//! implemented) and `authorization.mode: Webhook` cannot ask for a SubjectAccessReview: with a
//! rule file it uses the rules, without one it refuses every request (403) rather than
//! allowing whatever a cluster CA signed. An unset mode is `AlwaysAllow` for authenticated
//! users: authentication is then the gate, and by default nobody authenticates.

use std::net::{IpAddr, SocketAddr};

use std::path::PathBuf;

use super::checks::check_absolute;
use super::flags::invalid_flag;
use super::raw::RawKubeletConfiguration;
use super::{ConfigError, RunFlags};
use crate::nodeapi::tls::{check_cipher_suites, parse_min_version, MinVersion};
use crate::nodeapi::{
    AuthorizationMode, NodeServerConfig, DEFAULT_HEALTHZ_BIND_ADDRESS, DEFAULT_HEALTHZ_PORT,
};

/// The node API fields as the file set them (`None`: unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFields {
    /// `healthzPort`; 0 turns the healthz port off.
    pub healthz_port: Option<u16>,
    /// `healthzBindAddress`.
    pub healthz_bind_address: Option<IpAddr>,
    /// `enableServer` (default true).
    pub enable_server: Option<bool>,
    /// `address` (default 0.0.0.0).
    pub address: Option<IpAddr>,
    /// `port` (default 10250).
    pub port: Option<u16>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub tls_min_version: MinVersion,
    pub tls_cipher_suites: Vec<String>,
    /// `authentication.x509.clientCAFile`.
    pub client_ca_file: Option<PathBuf>,
    /// `authentication.anonymous.enabled` (default false).
    pub anonymous: bool,
    /// `authorization.mode`: `None` unset, `Some(true)` Webhook, `Some(false)` AlwaysAllow.
    pub webhook_authorization: Option<bool>,
    /// `enableDebuggingHandlers` (default true): `/containerLogs`, `/logs`.
    pub enable_debugging_handlers: Option<bool>,
    /// `enableSystemLogHandler` (default true): `/logs`.
    pub enable_system_log_handler: Option<bool>,
}

impl ServerFields {
    /// Where the healthz port listens (the kubelet's 127.0.0.1:10248 by default), `None`
    /// when `healthzPort` is 0.
    pub fn healthz_addr(&self) -> Option<SocketAddr> {
        let port = self.healthz_port.unwrap_or(DEFAULT_HEALTHZ_PORT);
        let ip = self.healthz_bind_address.unwrap_or_else(|| {
            DEFAULT_HEALTHZ_BIND_ADDRESS
                .parse()
                .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
        });
        (port != 0).then_some(SocketAddr::new(ip, port))
    }

    /// The secure port's settings with the flags applied, `None` when `enableServer` is false.
    pub fn node_server(&self, flags: &RunFlags) -> Result<Option<NodeServerConfig>, ConfigError> {
        if self.enable_server == Some(false) {
            return Ok(None);
        }
        let authorization =
            match (self.webhook_authorization, &flags.authorization_rules_file) {
                (Some(false), Some(f)) => return Err(invalid_flag(
                    "authorization-rules-file",
                    &f.display().to_string(),
                    "authorization.mode is AlwaysAllow: a rule file needs mode Webhook or no mode",
                )),
                (_, Some(f)) => AuthorizationMode::Rules(f.clone()),
                (Some(true), None) => AuthorizationMode::DenyAll,
                (_, None) => AuthorizationMode::AlwaysAllow,
            };
        let ip = self
            .address
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        Ok(Some(NodeServerConfig {
            addr: SocketAddr::new(
                ip,
                self.port.unwrap_or(crate::nodeapi::secure::DEFAULT_PORT),
            ),
            tls_cert_file: self.tls_cert_file.clone(),
            tls_private_key_file: self.tls_private_key_file.clone(),
            tls_min_version: self.tls_min_version,
            tls_cipher_suites: self.tls_cipher_suites.clone(),
            client_ca_file: self.client_ca_file.clone(),
            token_auth_file: flags.token_auth_file.clone(),
            anonymous: self.anonymous,
            authorization,
            debugging_handlers: self.enable_debugging_handlers.unwrap_or(true),
            // The kubelet serves /logs only with both.
            system_log_handler: self.enable_debugging_handlers.unwrap_or(true)
                && self.enable_system_log_handler.unwrap_or(true),
        }))
    }
}

/// The parts of `authentication` and `authorization` podvisor cannot implement without an API
/// server, for the start-up warning.
pub(super) fn unimplemented(raw: &RawKubeletConfiguration) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(w) = raw.authentication.as_ref().and_then(|a| a.webhook.as_ref()) {
        if w.enabled == Some(true) {
            out.push("authentication.webhook".to_string());
        }
    }
    if raw
        .authorization
        .as_ref()
        .is_some_and(|a| a.webhook.is_some())
    {
        out.push("authorization.webhook".to_string());
    }
    out
}

/// Checks the node API fields; every bad value is an error naming the field.
pub(super) fn parse(
    raw: &RawKubeletConfiguration,
    source_name: &str,
) -> Result<ServerFields, ConfigError> {
    let invalid = |field: &str, message: String| ConfigError::Invalid {
        source_name: source_name.into(),
        location: String::new(),
        field: field.into(),
        message,
    };
    let port = |field: &str, v: Option<i32>| -> Result<Option<u16>, ConfigError> {
        match v {
            None => Ok(None),
            Some(n) => u16::try_from(n)
                .map(Some)
                .map_err(|_| invalid(field, format!("{n} must be between 0 and 65535"))),
        }
    };
    let ip = |field: &str, v: &Option<String>| -> Result<Option<IpAddr>, ConfigError> {
        match v.as_deref() {
            None | Some("") => Ok(None),
            Some(s) => s.parse().map(Some).map_err(|_| {
                invalid(
                    field,
                    format!("{s:?} must be an IP address (such as 127.0.0.1 or ::1)"),
                )
            }),
        }
    };
    if let Some(p) = raw.read_only_port.filter(|p| *p != 0) {
        return Err(invalid(
            "readOnlyPort",
            format!(
                "{p}: podvisor does not serve the unauthenticated read-only port; set 0 (the \
                 default) and read /pods, /metrics and /stats from the authenticated `port`"
            ),
        ));
    }
    let path = |field: &str, v: Option<&String>| -> Result<Option<PathBuf>, ConfigError> {
        match v.map(String::as_str) {
            None | Some("") => Ok(None),
            Some(s) => {
                let p = PathBuf::from(s);
                check_absolute(&p).map_err(|m| invalid(field, m.to_string()))?;
                Ok(Some(p))
            }
        }
    };
    let server_port = match raw.port {
        None | Some(0) => None,
        Some(n) => Some(
            u16::try_from(n)
                .map_err(|_| invalid("port", format!("{n} must be between 1 and 65535")))?,
        ),
    };
    let tls_min_version = parse_min_version(raw.tls_min_version.as_deref().unwrap_or(""))
        .map_err(|e| invalid("tlsMinVersion", e.to_string()))?;
    let tls_cipher_suites = raw.tls_cipher_suites.clone().unwrap_or_default();
    check_cipher_suites(&tls_cipher_suites)
        .map_err(|e| invalid("tlsCipherSuites", e.to_string()))?;
    let tls_cert_file = path("tlsCertFile", raw.tls_cert_file.as_ref())?;
    let tls_private_key_file = path("tlsPrivateKeyFile", raw.tls_private_key_file.as_ref())?;
    if tls_cert_file.is_some() != tls_private_key_file.is_some() {
        return Err(invalid(
            "tlsCertFile",
            "tlsCertFile and tlsPrivateKeyFile must be set together (neither: a self-signed \
             certificate is generated in <root-dir>/pki)"
                .into(),
        ));
    }
    let authn = raw.authentication.as_ref();
    let client_ca_file = path(
        "authentication.x509.clientCAFile",
        authn
            .and_then(|a| a.x509.as_ref())
            .and_then(|x| x.client_ca_file.as_ref()),
    )?;
    let anonymous = authn
        .and_then(|a| a.anonymous.as_ref())
        .and_then(|a| a.enabled)
        .unwrap_or(false);
    let webhook_authorization = match raw.authorization.as_ref().and_then(|a| a.mode.as_deref()) {
        None | Some("") => None,
        Some("Webhook") => Some(true),
        Some("AlwaysAllow") => Some(false),
        Some(m) => {
            return Err(invalid(
                "authorization.mode",
                format!("{m:?} must be AlwaysAllow or Webhook"),
            ))
        }
    };
    Ok(ServerFields {
        healthz_port: port("healthzPort", raw.healthz_port)?,
        healthz_bind_address: ip("healthzBindAddress", &raw.healthz_bind_address)?,
        enable_server: raw.enable_server,
        address: ip("address", &raw.address)?,
        port: server_port,
        tls_cert_file,
        tls_private_key_file,
        tls_min_version,
        tls_cipher_suites,
        client_ca_file,
        anonymous,
        webhook_authorization,
        enable_debugging_handlers: raw.enable_debugging_handlers,
        enable_system_log_handler: raw.enable_system_log_handler,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::parse_kubelet_config;

    const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

    fn parse(body: &str) -> Result<crate::config::KubeletConfig, String> {
        parse_kubelet_config(format!("{HEAD}{body}").as_bytes(), "k.yaml")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn healthz_defaults_and_values() {
        let d = parse("").expect("empty");
        assert_eq!(
            d.server.healthz_addr(),
            Some("127.0.0.1:10248".parse().expect("addr"))
        );
        let c = parse("healthzPort: 0\n").expect("off");
        assert_eq!(c.server.healthz_addr(), None);
        let c = parse("healthzPort: 9999\nhealthzBindAddress: \"::1\"\n").expect("v6");
        assert_eq!(
            c.server.healthz_addr(),
            Some("[::1]:9999".parse().expect("addr"))
        );
        assert!(!c
            .unimplemented_fields
            .iter()
            .any(|f| f.starts_with("healthz")));
    }

    #[test]
    fn bad_server_fields_are_named() {
        for (body, want) in [
            (
                "healthzPort: 70000\n",
                "healthzPort: 70000 must be between 0 and 65535",
            ),
            (
                "healthzPort: -1\n",
                "healthzPort: -1 must be between 0 and 65535",
            ),
            (
                "healthzBindAddress: localhost\n",
                "healthzBindAddress: \"localhost\" must be an IP",
            ),
            (
                "readOnlyPort: 10255\n",
                "readOnlyPort: 10255: podvisor does not serve",
            ),
        ] {
            let e = parse(body).expect_err(body);
            assert!(e.contains(want), "{body}: {e}");
        }
        assert!(parse("readOnlyPort: 0\n").is_ok());
        for (body, want) in [
            ("port: 70000\n", "port: 70000 must be between 1 and 65535"),
            ("address: any\n", "address: \"any\" must be an IP"),
            (
                "tlsMinVersion: VersionTLS10\n",
                "tlsMinVersion: tlsMinVersion: \"VersionTLS10\"",
            ),
            (
                "tlsCipherSuites: [TLS_RSA_WITH_RC4_128_SHA]\n",
                "\"TLS_RSA_WITH_RC4_128_SHA\" is not",
            ),
            ("tlsCertFile: /a.crt\n", "must be set together"),
            (
                "tlsCertFile: a.crt\ntlsPrivateKeyFile: /a.key\n",
                "tlsCertFile",
            ),
            (
                "authorization:\n  mode: RBAC\n",
                "authorization.mode: \"RBAC\" must be",
            ),
            (
                "authentication:\n  x509:\n    clientCAFile: ca.crt\n",
                "clientCAFile",
            ),
        ] {
            let e = parse(body).expect_err(body);
            assert!(e.contains(want), "{body}: {e}");
        }
    }

    #[test]
    fn secure_port_defaults_modes_and_flags() {
        use crate::nodeapi::AuthorizationMode;
        let flags = |args: &[&str]| {
            let mut f = crate::config::RunFlags::default();
            for pair in args.chunks(2) {
                match pair[0] {
                    "--token-auth-file" => f.token_auth_file = Some(pair[1].into()),
                    _ => f.authorization_rules_file = Some(pair[1].into()),
                }
            }
            f
        };
        let d = parse("").expect("empty").server;
        let ns = d
            .node_server(&flags(&[]))
            .expect("ok")
            .expect("on by default");
        assert_eq!(ns.addr, "0.0.0.0:10250".parse().expect("addr"));
        assert!(!ns.anonymous);
        assert_eq!(ns.authorization, AuthorizationMode::AlwaysAllow);
        let off = parse("enableServer: false\n").expect("off").server;
        assert_eq!(off.node_server(&flags(&[])).expect("ok"), None);
        let webhook = parse("authorization:\n  mode: Webhook\n")
            .expect("webhook")
            .server;
        assert_eq!(
            webhook
                .node_server(&flags(&[]))
                .expect("ok")
                .expect("on")
                .authorization,
            AuthorizationMode::DenyAll
        );
        let ns = webhook
            .node_server(&flags(&["--authorization-rules-file", "/r.yaml"]))
            .expect("ok")
            .expect("on");
        assert_eq!(ns.authorization, AuthorizationMode::Rules("/r.yaml".into()));
        let allow = parse("authorization:\n  mode: AlwaysAllow\n")
            .expect("allow")
            .server;
        let e = allow
            .node_server(&flags(&["--authorization-rules-file", "/r.yaml"]))
            .expect_err("conflict");
        assert!(e.to_string().contains("AlwaysAllow"), "{e}");
        let c = parse(
            "address: 10.0.0.5\nport: 11250\ntlsMinVersion: VersionTLS13\n\
             authentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: true\n",
        )
        .expect("full");
        assert!(c
            .unimplemented_fields
            .contains(&"authentication.webhook".to_string()));
        let ns = c
            .server
            .node_server(&flags(&["--token-auth-file", "/t.csv"]))
            .expect("ok")
            .expect("on");
        assert_eq!(ns.addr, "10.0.0.5:11250".parse().expect("addr"));
        assert!(ns.anonymous);
        assert_eq!(ns.token_auth_file, Some("/t.csv".into()));
        assert_eq!(ns.tls_min_version, crate::nodeapi::tls::MinVersion::Tls13);
    }
}
