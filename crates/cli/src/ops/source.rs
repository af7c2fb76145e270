//! Where an operator command reads: a gateway over HTTP, or the backends opened directly. Both
//! answer in the gateway's JSON shapes, so every command renders one way (ADR 0240): opened
//! directly, the queue commands ask the same queue service the gateway answers from (ADR 0372).

use std::sync::Arc;

use serde_json::Value;
use switchyard_client::{Client, RunRef};
use switchyard_core::fleet::FleetBackend;
use switchyard_core::stream::MemoryStreamBridge;
use switchyard_kit::core::{Priority, RunStatus};
use switchyard_kit::{BackendUrl, Config, Port};
use switchyard_service::runs::{RunSettings, Runs};
use tokio::sync::OnceCell;

use super::{Failure, NOT_FOUND, context};
use crate::backends;
use switchyard_service::queues::{PriorityInput, Queues, RequeueBody};

/// A gateway, or the backends of the configuration (and the command's `--url`).
#[derive(Debug)]
pub enum Source {
    Gateway(Client),
    Direct(Box<Direct>),
}

/// The backends, opened on first use; never created by a read.
#[derive(Debug)]
pub struct Direct {
    config: Config,
    url: Option<String>,
    runs: OnceCell<Runs>,
    fleet: OnceCell<Arc<dyn FleetBackend>>,
}

impl Direct {
    pub fn new(config: Config, url: Option<String>) -> Self {
        Direct {
            config,
            url,
            runs: OnceCell::new(),
            fleet: OnceCell::new(),
        }
    }

    /// The run rules over the configured event store: the same code and answers as the
    /// gateway's run routes. Operator commands only read runs, so nothing is published: the
    /// bridge is an in-process one that no reader follows.
    async fn runs(&self) -> Result<&Runs, Failure> {
        self.runs
            .get_or_try_init(|| async {
                let url = self.existing(Port::EventStore)?;
                let store = backends::event_store(&self.config, Some(&url)).await?;
                let bridge = Arc::new(MemoryStreamBridge::new(1)?);
                // Reads claim nothing and release no stream; these only fill the settings.
                let settings = RunSettings {
                    stale_after: std::time::Duration::from_secs(300),
                    stream_grace: std::time::Duration::from_secs(60),
                };
                Ok(Runs::new(store, bridge, settings))
            })
            .await
    }

    /// The run rules with the configured fleet too, for the commands that write: a cancel's
    /// grace period is a delayed task there, which a gateway's keeper runs.
    pub(super) async fn runs_with_fleet(&self) -> Result<Runs, Failure> {
        let fleet = self.fleet().await?.clone();
        Ok(self.runs().await?.clone().with_fleet(fleet))
    }

    pub(super) async fn fleet(&self) -> Result<&Arc<dyn FleetBackend>, Failure> {
        self.fleet
            .get_or_try_init(|| async {
                let url = self.existing(Port::Fleet)?;
                Ok(backends::fleet(&self.config, Some(&url)).await?)
            })
            .await
    }

    /// The queue service over the fleet backend.
    pub(super) async fn queues(&self) -> Result<Queues, Failure> {
        Ok(Queues::new(self.fleet().await?.clone()))
    }

    /// The URL of `port`; a SQLite file must already exist: operator commands never create a
    /// database (an empty new file would answer every question with "nothing").
    fn existing(&self, port: Port) -> Result<String, Failure> {
        let url = backends::url_for(&self.config, port, self.url.as_deref())?;
        if let Some(path) = BackendUrl::parse("--url", &url)?.path()
            && !path.exists()
        {
            return Err(Failure::exit(
                NOT_FOUND,
                format!(
                    "no database at {}: nothing was ever written there. Ask the running gateway \
                     with --server URL (or SWITCHYARD_SERVER), or name an existing file with \
                     --sqlite PATH or --url sqlite://PATH",
                    path.display()
                ),
            ));
        }
        Ok(url)
    }
}

impl Source {
    /// `{run_id, log_key, status}` of each run, sorted by log then run.
    pub async fn runs(
        &self,
        namespace: Option<String>,
        status: Option<String>,
    ) -> Result<Vec<Value>, Failure> {
        match self {
            Source::Gateway(gw) => {
                let status = status.map(|s| s.parse::<RunStatus>()).transpose()?;
                let list = gw.runs(namespace.as_deref(), status).await?;
                Ok(array(&to_json(list), "runs"))
            }
            Source::Direct(d) => {
                // Checked as the gateway checks its query (an empty namespace is refused).
                let ctx = context("list", None, namespace)?;
                let status = status.map(|s| s.parse::<RunStatus>()).transpose()?;
                let list = d.runs().await?.list(ctx.namespace(), status).await?;
                Ok(array(&to_json(list), "runs"))
            }
        }
    }

    /// The run as `GET /v1/runs/{run}` answers it, or `None` when its log has no such run.
    pub async fn run(
        &self,
        run: &str,
        session: Option<String>,
        namespace: Option<String>,
        from_seq: u64,
    ) -> Result<Option<Value>, Failure> {
        match self {
            Source::Gateway(gw) => {
                let address = RunRef {
                    run_id: run.to_string(),
                    session,
                    namespace,
                };
                match gw.run(&address, from_seq).await {
                    Ok(view) => Ok(Some(to_json(view))),
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
            Source::Direct(d) => {
                let ctx = context(run, session, namespace)?;
                match d.runs().await?.read(&ctx, from_seq).await {
                    Ok(view) => Ok(Some(to_json(view))),
                    Err(switchyard_service::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// The queues that hold tasks (and those a gateway watches), sorted.
    pub async fn queue_names(&self) -> Result<Vec<String>, Failure> {
        match self {
            Source::Gateway(gw) => Ok(gw.queues().await?.queues),
            Source::Direct(d) => Ok(d.queues().await?.names([]).await?.queues),
        }
    }

    /// Every count of `queue`, as `GET /v1/queues/{queue}` answers.
    pub async fn queue_stats(&self, queue: &str) -> Result<Value, Failure> {
        match self {
            Source::Gateway(gw) => Ok(to_json(gw.queue_stats(queue).await?)),
            Source::Direct(d) => Ok(to_json(d.queues().await?.stats(queue).await?)),
        }
    }

    /// The next waiting tasks.
    pub async fn queue_peek(&self, queue: &str, limit: u64) -> Result<Vec<Value>, Failure> {
        match self {
            Source::Gateway(gw) => Ok(gw.waiting_tasks(queue, Some(limit)).await?.tasks),
            Source::Direct(d) => {
                let waiting = d.queues().await?.peek(queue, Some(usize_of(limit))).await?;
                Ok(waiting.tasks)
            }
        }
    }

    /// The oldest dead letters, and how many there are.
    pub async fn dead_letters(
        &self,
        queue: &str,
        limit: u64,
    ) -> Result<(Vec<Value>, u64), Failure> {
        match self {
            Source::Gateway(gw) => {
                let list = gw.dead_letters(queue, Some(limit)).await?;
                Ok((list.dead_letters, list.total))
            }
            Source::Direct(d) => {
                let queues = d.queues().await?;
                let list = queues.dead_letters(queue, Some(usize_of(limit))).await?;
                Ok((list.dead_letters, list.total))
            }
        }
    }

    /// Moves up to `n` dead letters back into the `priority` tier, atomically; how many moved.
    pub async fn requeue(&self, queue: &str, n: u64, priority: Priority) -> Result<u64, Failure> {
        match self {
            Source::Gateway(gw) => Ok(gw
                .requeue(queue, &requeue_oldest(n, priority))
                .await?
                .requeued),
            Source::Direct(d) => {
                let body = requeue_oldest(n, priority);
                Ok(d.queues().await?.requeue(queue, body).await?.requeued)
            }
        }
    }

    /// Registered workers (of one automation type).
    pub async fn workers(&self, automation_type: Option<String>) -> Result<Vec<Value>, Failure> {
        match self {
            Source::Gateway(gw) => {
                let list = gw.workers(automation_type.as_deref()).await?;
                Ok(list.workers.into_iter().map(to_json).collect())
            }
            Source::Direct(d) => {
                let list = d
                    .queues()
                    .await?
                    .workers(automation_type.as_deref())
                    .await?;
                Ok(list.workers.into_iter().map(to_json).collect())
            }
        }
    }
}

/// The oldest `n` dead letters into the `priority` tier.
fn requeue_oldest(n: u64, priority: Priority) -> RequeueBody {
    RequeueBody {
        limit: Some(n),
        refs: None,
        priority: Some(PriorityInput::Name(super::tier(priority).to_string())),
    }
}

fn array(body: &Value, key: &str) -> Vec<Value> {
    body.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A service answer in the JSON the gateway would send.
pub(super) fn to_json(answer: impl serde::Serialize) -> Value {
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
