//! A real 3-node (or N-node) nats-server JetStream cluster on loopback: every node routes to
//! every other, each stores into its own TempDir, and any node can be killed and restarted on
//! the same ports and store.

use std::time::Duration;

use crate::http_probe::http_get;
use crate::nats_server::NatsServer;
use crate::readiness::{free_port, wait_until};

const HEALTHY_TIMEOUT: Duration = Duration::from_secs(60);
const CLUSTER_NAME: &str = "loopgate-test";

/// A JetStream cluster of real nats-server processes, killed on drop.
pub struct NatsCluster {
    nodes: Vec<NatsServer>,
    names: Vec<String>,
}

impl NatsCluster {
    /// Starts `size` nodes (`n1`..) with routes between all of them and waits until every node
    /// answers `/healthz` with 200 (JetStream up and a meta leader elected).
    pub async fn start(size: usize) -> anyhow::Result<NatsCluster> {
        anyhow::ensure!(size >= 1, "a cluster needs at least one node");
        let mut route_ports: Vec<u16> = Vec::with_capacity(size);
        while route_ports.len() < size {
            let port = free_port()?;
            if !route_ports.contains(&port) {
                route_ports.push(port);
            }
        }
        let mut nodes = Vec::with_capacity(size);
        let mut names = Vec::with_capacity(size);
        for (i, own) in route_ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let routes: Vec<String> = route_ports
                .iter()
                .filter(|p| *p != own)
                .map(|p| format!("\"nats-route://127.0.0.1:{p}\""))
                .collect();
            let conf = format!(
                "server_name: {name}\ncluster {{\n  name: {CLUSTER_NAME}\n  listen: \"127.0.0.1:{own}\"\n  routes: [{}]\n}}\n",
                routes.join(", ")
            );
            // Each node is ready for this step once JetStream is on; the cluster as a whole
            // is awaited below, once every node is up.
            nodes.push(NatsServer::start_with_config(&conf).await?);
            names.push(name);
        }
        let cluster = NatsCluster { nodes, names };
        cluster.wait_healthy().await?;
        Ok(cluster)
    }

    /// Every node's client URL, comma-separated (what the daemons' `[nats] url` takes).
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `index`, e.g. for its log or its monitoring URL.
    pub fn node(&self, index: usize) -> &NatsServer {
        &self.nodes[index]
    }

    /// Node `index`, e.g. to send it a signal.
    pub fn node_mut(&mut self, index: usize) -> &mut NatsServer {
        &mut self.nodes[index]
    }

    /// The `server_name` of node `index` (`n1`..).
    pub fn name(&self, index: usize) -> &str {
        &self.names[index]
    }

    /// The index of the node the cluster names as its JetStream meta leader, or None while
    /// there is none.
    pub async fn meta_leader(&self) -> Option<usize> {
        meta_leader(&self.nodes.iter().collect::<Vec<_>>()).await
    }

    /// SIGKILL node `index`.
    pub fn kill(&mut self, index: usize) {
        self.nodes[index].kill();
    }

    /// Restart node `index` on its ports and store, then wait until the whole cluster is
    /// healthy again.
    pub async fn restart(&mut self, index: usize) -> anyhow::Result<()> {
        self.nodes[index].restart().await?;
        self.wait_healthy().await
    }

    /// Waits until every node answers `/healthz` with 200.
    pub async fn wait_healthy(&self) -> anyhow::Result<()> {
        wait_healthy(&self.nodes.iter().collect::<Vec<_>>()).await
    }

    /// The nodes, in order (`n1` first), e.g. for a stack that holds them one by one.
    pub fn into_nodes(self) -> Vec<NatsServer> {
        self.nodes
    }
}

/// The index in `nodes` of the JetStream meta leader (asked of every node that answers; the
/// leader's name matched against each node's `/varz` `server_name`), or None while there is
/// none.
pub async fn meta_leader(nodes: &[&NatsServer]) -> Option<usize> {
    let get = |url: String| async move {
        let reply = http_get(&url, Duration::from_secs(2)).await.ok()?;
        serde_json::from_str::<serde_json::Value>(&reply.body).ok()
    };
    let mut leader = None;
    for node in nodes {
        if let Some(jsz) = get(format!("{}/jsz", node.monitor_url())).await {
            if let Some(name) = jsz["meta_cluster"]["leader"].as_str() {
                leader = Some(name.to_string());
                break;
            }
        }
    }
    let leader = leader?;
    for (i, node) in nodes.iter().enumerate() {
        if let Some(varz) = get(format!("{}/varz", node.monitor_url())).await {
            if varz["server_name"].as_str() == Some(leader.as_str()) {
                return Some(i);
            }
        }
    }
    None
}

/// Waits until every one of `nodes` answers `/healthz` with 200 (JetStream current, a meta
/// leader known).
pub async fn wait_healthy(nodes: &[&NatsServer]) -> anyhow::Result<()> {
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}/healthz", n.monitor_url()))
        .collect();
    let healthy = wait_until(HEALTHY_TIMEOUT, || {
        let urls = urls.clone();
        async move {
            for url in &urls {
                match http_get(url, Duration::from_secs(2)).await {
                    Ok(r) if r.status == 200 => {}
                    _ => return false,
                }
            }
            true
        }
    })
    .await;
    if healthy.is_err() {
        let logs: Vec<String> = nodes
            .iter()
            .map(|n| format!("--- {} ---\n{}", n.url(), tail(&n.log_text(), 3000)))
            .collect();
        anyhow::bail!(
            "the NATS cluster is not healthy after {HEALTHY_TIMEOUT:?}\n{}",
            logs.join("\n")
        );
    }
    Ok(())
}

fn tail(text: &str, max: usize) -> &str {
    let start = text.len().saturating_sub(max);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}

impl std::fmt::Debug for NatsCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsCluster")
            .field("url", &self.url())
            .finish()
    }
}
