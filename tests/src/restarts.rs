//! Crashing and restarting parts of a running stack: workers on their own configs, and the
//! nats-server nodes and redis-server on their own ports and data directories.

use std::time::Duration;

use loopgate_test_support::{http_get, meta_leader, wait_cluster_healthy, ChildGuard, NatsServer};

use crate::daemons::Worker;
use crate::run_checks::{findings, RunFindings};
use crate::Stack;

impl Stack {
    /// Reads run `id`'s record, log and evidence history from any live manager.
    pub async fn inspect_run(&self, id: &str) -> anyhow::Result<RunFindings> {
        let run = self.run(id).await?;
        let log = self.get(&format!("/v1/runs/{id}/log")).await?;
        let entries = log["entries"].as_array().cloned().unwrap_or_default();
        let evidence = self.get(&format!("/v1/runs/{id}/evidence")).await?;
        let bound: Vec<String> = evidence["evidence"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e["artifact_version"].as_str().map(str::to_string))
            .collect();
        Ok(findings(id, &run, &entries, &bound))
    }

    /// Every daemon URL for `[nats] url`: each node of the cluster, comma-separated.
    pub fn nats_url(&self) -> String {
        self.nats_nodes()
            .iter()
            .map(|n| n.url())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The nats-server nodes (one unless the stack runs a cluster).
    pub fn nats_nodes(&self) -> Vec<&NatsServer> {
        std::iter::once(&self.nats)
            .chain(&self.nats_peers)
            .collect()
    }

    /// Node `index` of the NATS cluster (0 is `Stack::nats`).
    pub fn nats_node_mut(&mut self, index: usize) -> &mut NatsServer {
        if index == 0 {
            &mut self.nats
        } else {
            &mut self.nats_peers[index - 1]
        }
    }

    /// The index of the cluster's JetStream meta leader, if one is known.
    pub async fn nats_meta_leader(&self) -> Option<usize> {
        meta_leader(&self.nats_nodes()).await
    }

    /// Where each node's streams and consumers live, one line each (`node n2: LG_AUDIT R3
    /// leader n3; consumer audit leader n3`), for a failure message: a stream missing from
    /// every live node was placed on a dead one.
    pub async fn nats_placement(&self) -> String {
        let mut lines = Vec::new();
        for (i, node) in self.nats_nodes().iter().enumerate() {
            let url = format!(
                "{}/jsz?streams=true&consumers=true&config=true",
                node.monitor_url()
            );
            let Ok(reply) = http_get(&url, Duration::from_secs(3)).await else {
                lines.push(format!("node {i}: not answering"));
                continue;
            };
            let jsz: serde_json::Value = serde_json::from_str(&reply.body).unwrap_or_default();
            let streams = jsz["account_details"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|a| a["stream_detail"].as_array().cloned().unwrap_or_default());
            for st in streams {
                let consumers: Vec<String> = st["consumer_detail"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| format!("consumer {} leader {}", c["name"], c["cluster"]["leader"]))
                    .collect();
                lines.push(format!(
                    "node {i}: {} R{} leader {}; {}",
                    st["name"],
                    st["config"]["num_replicas"],
                    st["cluster"]["leader"],
                    consumers.join(", ")
                ));
            }
        }
        lines.join("\n")
    }

    /// Waits until every nats-server node answers `/healthz` with 200.
    pub async fn wait_nats_healthy(&self) -> anyhow::Result<()> {
        wait_cluster_healthy(&self.nats_nodes()).await
    }

    /// Number of auditors (`Stack::auditor` and `Stack::more_auditors`).
    pub fn auditor_count(&self) -> usize {
        1 + self.more_auditors.len()
    }

    /// The process of a worker.
    pub fn worker_mut(&mut self, worker: Worker) -> &mut ChildGuard {
        match worker {
            Worker::Executor(i) => &mut self.executors[i],
            Worker::Auditor(0) => &mut self.auditor,
            Worker::Auditor(i) => &mut self.more_auditors[i - 1],
        }
    }

    /// The worker id a worker announces in the run log (`exec-1`, `audit-2`, ...).
    pub fn worker_id(&self, worker: Worker) -> String {
        match worker {
            Worker::Executor(i) => format!("exec-{}", i + 1),
            Worker::Auditor(i) => format!("audit-{}", i + 1),
        }
    }

    /// kill -9 a worker (if running) and start it again on the same config and work dir.
    pub fn restart_worker(&mut self, worker: Worker) -> anyhow::Result<()> {
        let spec = match worker {
            Worker::Executor(i) => self.worker_specs[i].clone(),
            Worker::Auditor(i) => self.worker_specs[self.executors.len() + i].clone(),
        };
        spec.respawn(self.worker_mut(worker))
    }
}
