//! config::server: the node API fields of the KubeletConfiguration — `healthzPort`,
//! `healthzBindAddress` and `readOnlyPort` (refused unless 0: the unauthenticated port stays
//! off) — checked into [`ServerFields`] and resolved with the kubelet's defaults by
//! [`ServerFields::healthz_addr`].

use std::net::{IpAddr, SocketAddr};

use super::*;
use crate::nodeapi::{DEFAULT_HEALTHZ_BIND_ADDRESS, DEFAULT_HEALTHZ_PORT};

/// The node API fields as the file set them (`None`: unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFields {
    /// `healthzPort`; 0 turns the healthz port off.
    pub healthz_port: Option<u16>,
    /// `healthzBindAddress`.
    pub healthz_bind_address: Option<IpAddr>,
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
    Ok(ServerFields {
        healthz_port: port("healthzPort", raw.healthz_port)?,
        healthz_bind_address: ip("healthzBindAddress", &raw.healthz_bind_address)?,
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
    }
}
