//! Tests of the daemon configuration: kubelet config files, flags, precedence.

use super::*;
use clap::Parser;

mod eviction;
mod examples;
mod file;
mod flags;
mod load;
mod network;

/// What `kubeadm init` (v1.30+) writes to /var/lib/kubelet/config.yaml, plus a few settings
/// operators commonly add (eviction, reservations, feature gates, taints, log rotation).
const KUBEADM_CONFIG: &str = r#"apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
# operator additions
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "10%"
systemReserved:
  cpu: 500m
  memory: 512Mi
featureGates:
  GracefulNodeShutdown: true
registerWithTaints:
- key: node-role.kubernetes.io/edge
  effect: NoSchedule
tracing:
  endpoint: localhost:4317
  samplingRatePerMillion: 100
containerLogMaxSize: 50Mi
containerLogMaxFiles: 3
podPidsLimit: 4096
maxPods: 110
"#;

fn parse(text: &str) -> Result<KubeletConfig, ConfigError> {
    parse_kubelet_config(text.as_bytes(), "kubelet.yaml")
}

fn with_header(body: &str) -> String {
    format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{body}")
}

fn flags(args: &[&str]) -> RunFlags {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunFlags,
    }
    let mut argv = vec!["podvisor-run"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).expect("flags parse").run
}

fn write_config(dir: &tempfile::TempDir, body: &str) -> PathBuf {
    let path = dir.path().join("kubelet.yaml");
    std::fs::write(&path, with_header(body)).expect("write config");
    path
}
