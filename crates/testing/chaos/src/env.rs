//! The servers of a scenario and the faults injected into them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use switchyard_conformance::harness::{
    PostgresServer, RedisCluster, RedisServer, postgres_query, redis_cmd,
};

use crate::{Scale, Scenario};

/// Which kind of server a scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Redis,
    Postgres,
}

/// Where the adapters connect, and which slots the fault hits (cluster only).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub backend: Backend,
    /// `redis://…`, `redis-cluster://…` or `postgres://…`.
    pub url: String,
    /// `redis://` URLs of every node (one for a standalone server).
    pub nodes: Vec<String>,
    /// The slot ranges served by the master the failover kills; empty on a standalone server.
    pub target_slots: Vec<(u16, u16)>,
}

impl Target {
    pub fn is_cluster(&self) -> bool {
        !self.target_slots.is_empty()
    }

    /// True when `key` lives on the master the failover kills (always true standalone). Lets a
    /// load pick the namespace / queue the fault hits.
    pub fn on_target(&self, key: &str) -> bool {
        if !self.is_cluster() {
            return true;
        }
        let Some(slot) = self.keyslot(key) else {
            return false;
        };
        self.target_slots
            .iter()
            .any(|(lo, hi)| (*lo..=*hi).contains(&slot))
    }

    fn keyslot(&self, key: &str) -> Option<u16> {
        self.nodes.iter().find_map(|n| {
            redis_cmd(n, &["CLUSTER", "KEYSLOT", key])
                .ok()?
                .parse()
                .ok()
        })
    }
}

/// The servers: owned here so they live as long as the scenario.
#[derive(Debug)]
pub(crate) enum Servers {
    Standalone(Arc<Mutex<RedisServer>>),
    Cluster(Arc<Mutex<RedisCluster>>),
    Postgres(Arc<Mutex<PostgresServer>>),
}

/// Starts the servers of `scenario` (blocking; call it off the async threads).
pub(crate) fn start(scenario: Scenario) -> Result<(Servers, Target), String> {
    match scenario {
        Scenario::ClientKill | Scenario::SigKill => {
            let args: &[&str] = if scenario == Scenario::SigKill {
                &["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                &[]
            };
            let server = RedisServer::start_with(args)?;
            let url = server.url();
            Ok((
                Servers::Standalone(Arc::new(Mutex::new(server))),
                Target {
                    backend: Backend::Redis,
                    nodes: vec![url.clone()],
                    url,
                    target_slots: Vec::new(),
                },
            ))
        }
        Scenario::Postgres => {
            // fsync on: a SIGKILL must not lose what a commit acknowledged.
            let server = PostgresServer::start_durable()?;
            let url = server.url();
            Ok((
                Servers::Postgres(Arc::new(Mutex::new(server))),
                Target {
                    backend: Backend::Postgres,
                    url,
                    nodes: Vec::new(),
                    target_slots: Vec::new(),
                },
            ))
        }
        Scenario::Failover => {
            let mut cluster = RedisCluster::start(3, 1)?;
            let url = cluster.url();
            let nodes: Vec<String> = cluster.nodes().iter().map(RedisServer::url).collect();
            let masters = cluster.master_ports();
            let victim = *masters.first().ok_or("the cluster has no master")?;
            let target_slots = slots_of(&nodes, victim)?;
            Ok((
                Servers::Cluster(Arc::new(Mutex::new(cluster))),
                Target {
                    backend: Backend::Redis,
                    url,
                    nodes,
                    target_slots,
                },
            ))
        }
    }
}

/// The slot ranges of the master on `port`, from `CLUSTER NODES`.
fn slots_of(nodes: &[String], port: u16) -> Result<Vec<(u16, u16)>, String> {
    let table = nodes
        .iter()
        .find_map(|n| redis_cmd(n, &["CLUSTER", "NODES"]).ok())
        .ok_or("no node answers CLUSTER NODES")?;
    let me = format!("127.0.0.1:{port}@");
    let line = table
        .lines()
        .find(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.starts_with(&me))
        })
        .ok_or_else(|| format!("port {port} not in CLUSTER NODES"))?;
    let ranges = line
        .split_whitespace()
        .skip(8)
        .filter_map(|r| {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            Some((lo.parse().ok()?, hi.parse().ok()?))
        })
        .collect::<Vec<(u16, u16)>>();
    if ranges.is_empty() {
        return Err(format!("the master on {port} serves no slot"));
    }
    Ok(ranges)
}

/// The port of the master serving `slot` now, from any live node.
fn master_of_slot(nodes: &[String], slot: u16) -> Option<u16> {
    let table = nodes
        .iter()
        .find_map(|n| redis_cmd(n, &["CLUSTER", "NODES"]).ok())?;
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let flags = f.get(2)?;
        if !flags.contains("master") || flags.contains("fail") {
            return None;
        }
        let serves = f.iter().skip(8).any(|r| {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
        });
        if !serves {
            return None;
        }
        f.get(1)?
            .split('@')
            .next()?
            .rsplit(':')
            .next()?
            .parse()
            .ok()
    })
}

/// What the fault thread did.
#[derive(Debug, Default)]
pub(crate) struct FaultLog {
    pub rounds: AtomicU64,
    pub killed: AtomicU64,
    /// Postgres: `pg_terminate_backend` rounds and the connections they ended.
    pub terminate_rounds: AtomicU64,
    pub terminated: AtomicU64,
    pub errors: Mutex<Vec<String>>,
}

impl FaultLog {
    fn error(&self, e: String) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(e);
        }
    }
}

/// Injects the scenario's fault until `stop` (client kills, server kills) or for the configured
/// number of failovers. Blocking: runs on its own thread. Leaves every server running.
pub(crate) fn inject(
    scenario: Scenario,
    servers: &Servers,
    target: &Target,
    scale: &Scale,
    stop: &AtomicBool,
    log: &FaultLog,
) {
    match (scenario, servers) {
        (Scenario::ClientKill, Servers::Standalone(_)) => {
            while !stop.load(Ordering::SeqCst) {
                // Pub/sub connections are their own client type; kill them too.
                for kind in ["normal", "pubsub"] {
                    match redis_cmd(
                        &target.url,
                        &["CLIENT", "KILL", "TYPE", kind, "SKIPME", "yes"],
                    ) {
                        Ok(n) => {
                            log.killed
                                .fetch_add(n.parse().unwrap_or(0), Ordering::SeqCst);
                        }
                        Err(e) => log.error(format!("CLIENT KILL: {e}")),
                    }
                }
                log.rounds.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(scale.kill_every);
            }
        }
        (Scenario::SigKill, Servers::Standalone(server)) => {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(scale.up_between_kills);
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut s) = server.lock() else {
                    log.error("server mutex poisoned".into());
                    return;
                };
                s.kill();
                log.killed.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(scale.down_for);
                if let Err(e) = s.restart() {
                    log.error(format!("restart: {e}"));
                }
                log.rounds.fetch_add(1, Ordering::SeqCst);
            }
            if let Ok(mut s) = server.lock()
                && !s.is_running()
                && let Err(e) = s.restart()
            {
                log.error(format!("final restart: {e}"));
            }
        }
        (Scenario::Failover, Servers::Cluster(cluster)) => {
            let probe_slot = target.target_slots.first().map_or(0, |r| r.0);
            for round in 0..scale.failovers {
                std::thread::sleep(scale.up_between_kills);
                let Some(victim) = master_of_slot(&target.nodes, probe_slot) else {
                    log.error(format!("round {round}: no master serves slot {probe_slot}"));
                    return;
                };
                let Ok(mut c) = cluster.lock() else {
                    log.error("cluster mutex poisoned".into());
                    return;
                };
                log.killed.fetch_add(1, Ordering::SeqCst);
                if let Err(e) = c.kill_master_and_wait_failover(victim) {
                    log.error(format!("failover of {victim}: {e}"));
                    return;
                }
                log.rounds.fetch_add(1, Ordering::SeqCst);
                // Bring the old master back as a replica, so the next round has one to promote.
                if round + 1 < scale.failovers
                    && let Err(e) = c.restart_node(victim)
                {
                    log.error(format!("rejoin of {victim}: {e}"));
                    return;
                }
            }
            // Load keeps running on the new master for a while before the checks.
            std::thread::sleep(scale.up_between_kills);
        }
        (Scenario::Postgres, Servers::Postgres(server)) => {
            while !stop.load(Ordering::SeqCst) {
                // Up: end the adapters' connections in a loop (pools reconnect, the listeners
                // listen again), then SIGKILL the server and restart it on its data.
                let until = std::time::Instant::now() + scale.up_between_kills;
                while std::time::Instant::now() < until && !stop.load(Ordering::SeqCst) {
                    match postgres_query(&target.url, TERMINATE) {
                        Ok(rows) => {
                            log.terminated
                                .fetch_add(rows.len() as u64, Ordering::SeqCst);
                            log.terminate_rounds.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => log.error(format!("pg_terminate_backend: {e}")),
                    }
                    std::thread::sleep(scale.kill_every.max(PG_TERMINATE_EVERY));
                }
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut s) = server.lock() else {
                    log.error("server mutex poisoned".into());
                    return;
                };
                s.kill();
                log.killed.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(scale.down_for);
                if let Err(e) = s.restart() {
                    log.error(format!("restart: {e}"));
                }
                log.rounds.fetch_add(1, Ordering::SeqCst);
            }
            if let Ok(mut s) = server.lock()
                && !s.is_running()
                && let Err(e) = s.restart()
            {
                log.error(format!("final restart: {e}"));
            }
        }
        _ => log.error("scenario and servers do not match".into()),
    }
}

/// Ends every client connection of the database but the one running it.
const TERMINATE: &str = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
     WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() \
     AND datname = current_database()";

/// The shortest pause between two `pg_terminate_backend` rounds: each round opens a connection
/// of its own, and the adapters need a moment to reconnect and work between rounds.
const PG_TERMINATE_EVERY: std::time::Duration = std::time::Duration::from_millis(25);

/// A one-line description of what was injected.
pub(crate) fn describe(scenario: Scenario, log: &FaultLog) -> String {
    let rounds = log.rounds.load(Ordering::SeqCst);
    let killed = log.killed.load(Ordering::SeqCst);
    let errors = log.errors.lock().map(|e| e.len()).unwrap_or(0);
    let what = match scenario {
        Scenario::ClientKill => {
            format!("{rounds} CLIENT KILL rounds, {killed} connections killed")
        }
        Scenario::SigKill => format!("{killed} SIGKILLs of redis-server, {rounds} restarts"),
        Scenario::Failover => format!("{killed} master(s) killed, {rounds} failover(s) completed"),
        Scenario::Postgres => format!(
            "{} connections ended by pg_terminate_backend in {} rounds, {killed} SIGKILLs of \
             postgres, {rounds} restarts",
            log.terminated.load(Ordering::SeqCst),
            log.terminate_rounds.load(Ordering::SeqCst)
        ),
    };
    if errors > 0 {
        format!("{what} ({errors} injector errors)")
    } else {
        what
    }
}

/// Shared handle to the number of faults injected (for the report).
pub(crate) fn count(scenario: Scenario, log: &FaultLog) -> u64 {
    match scenario {
        Scenario::ClientKill => log.killed.load(Ordering::SeqCst),
        Scenario::Postgres => {
            log.rounds.load(Ordering::SeqCst) + log.terminated.load(Ordering::SeqCst)
        }
        _ => log.rounds.load(Ordering::SeqCst),
    }
}

pub(crate) type SharedLog = Arc<FaultLog>;
