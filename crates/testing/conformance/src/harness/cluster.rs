use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::redis::{RedisServer, redis_cmd};

/// A Redis Cluster of `redis-server` processes on free ports: masters with replicas, every slot
/// assigned, `cluster_state:ok` on every node before [`RedisCluster::start`] returns.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// The cluster every test of this binary shares (3 masters, 3 replicas), as a
/// `redis-cluster://host:port?node=host:port&…` URL that fred understands.
/// `REDIS_CLUSTER_URL` overrides it.
///
/// # Panics
/// When no cluster can be started: the test fails with the reason; it is never skipped.
pub fn redis_cluster_url() -> String {
    static SHARED: OnceLock<Result<String, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            if let Ok(url) = std::env::var("REDIS_CLUSTER_URL")
                && !url.is_empty()
            {
                return Ok(url);
            }
            let cluster = RedisCluster::start(3, 1)?;
            let url = cluster.url();
            // Lives as long as the test binary; each node's watchdog stops it at exit.
            std::mem::forget(cluster);
            Ok(url)
        })
        .clone()
        .unwrap_or_else(|why| {
            panic!(
                "no Redis Cluster for the tests: set REDIS_CLUSTER_URL, or put redis-server and \
                 redis-cli on the PATH ({why})"
            )
        })
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each and waits until the cluster is ok.
    pub fn start(masters: usize, replicas: usize) -> Result<Self, String> {
        let total = masters * (1 + replicas);
        let mut nodes = Vec::with_capacity(total);
        for _ in 0..total {
            nodes.push(RedisServer::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
                // A replica may always fail over, however long since it last heard its master:
                // the fault tests kill masters right after start-up.
                "--cluster-replica-validity-factor",
                "0",
                "--appendonly",
                "no",
            ])?);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let output = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&output.stdout)
            ));
        }
        let cluster = RedisCluster { nodes };
        cluster.wait_until_ok(Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// `redis-cluster://127.0.0.1:p1?node=127.0.0.1:p2&…` over every node.
    pub fn url(&self) -> String {
        let mut ports = self.nodes.iter().map(RedisServer::port);
        let first = ports.next().unwrap_or_default();
        let others: Vec<String> = ports.map(|p| format!("node=127.0.0.1:{p}")).collect();
        if others.is_empty() {
            format!("redis-cluster://127.0.0.1:{first}")
        } else {
            format!("redis-cluster://127.0.0.1:{first}?{}", others.join("&"))
        }
    }

    /// Every node, masters and replicas.
    pub fn nodes(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// The ports of the nodes that are masters now.
    pub fn master_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| redis_cmd(&n.url(), &["ROLE"]).is_ok_and(|role| role.starts_with("master")))
            .map(RedisServer::port)
            .collect()
    }

    /// Kills the master on `port` with SIGKILL and waits until a replica has taken over and the
    /// cluster is ok again.
    pub fn kill_master_and_wait_failover(&mut self, port: u16) -> Result<(), String> {
        let masters_before = self.master_ports().len();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .ok_or_else(|| format!("no node on port {port}"))?;
        node.kill();
        // The survivors still say `cluster_state:ok` until the node timeout passes; wait for a
        // replica to be promoted, then for the cluster to settle.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.master_ports().len() < masters_before {
            if Instant::now() > deadline {
                return Err(format!("no replica took over from {port} within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.wait_until_ok(Duration::from_secs(30))
    }

    /// Starts the node on `port` again (after a kill) on its data directory, so it rejoins with
    /// its `nodes.conf` (a killed master comes back as a replica of its successor), and waits until
    /// the cluster is ok with its replica link up.
    pub fn restart_node(&mut self, port: u16) -> Result<(), String> {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .ok_or_else(|| format!("no node on port {port}"))?;
        node.restart()?;
        self.wait_until_ok(Duration::from_secs(30))
    }

    fn wait_until_ok(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let live: Vec<&RedisServer> = self
                .nodes
                .iter()
                .filter(|n| redis_cmd(&n.url(), &["PING"]).is_ok())
                .collect();
            let all_ok = !live.is_empty()
                && live.iter().all(|n| {
                    redis_cmd(&n.url(), &["CLUSTER", "INFO"])
                        .is_ok_and(|info| info.contains("cluster_state:ok"))
                        && redis_cmd(&n.url(), &["INFO", "replication"]).is_ok_and(|info| {
                            // Replicas count only once their link to the master is up.
                            info.contains("role:master") || info.contains("master_link_status:up")
                        })
                });
            if all_ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("cluster not ok after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
