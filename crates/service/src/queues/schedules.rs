//! Recurring schedules (ADR 0308): list, put, get, delete. The document is the typed layer's
//! schedule (`switchyard_fleet::ScheduleSpec`); the backend stores it (guarantee
//! `schedule.stored`) and the scheduler of any gateway or process fires it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchyard_fleet::ScheduleSpec;
use utoipa::ToSchema;

use super::{Queues, body_json, unix_now};
use crate::{Error, Result};

/// A schedule document as stored.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Schedule {
    /// The schedule's name.
    pub name: String,
    /// Its document: `cron`, `timezone`, `queue`, `payload`, `priority`, `catch_up`, `enabled`,
    /// `created_at`.
    pub spec: Value,
}

/// Every schedule (`GET /v1/schedules`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ScheduleList {
    /// Every schedule, by name.
    pub schedules: Vec<Schedule>,
}

/// What a delete did (`DELETE /v1/schedules/{name}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Deleted {
    pub name: String,
    /// A schedule of that name existed.
    pub deleted: bool,
}

impl Queues {
    /// Every schedule, sorted by name.
    pub async fn schedules(&self) -> Result<ScheduleList> {
        let all = self.fleet.schedule_list().await?;
        let schedules = all
            .into_iter()
            .map(|(name, doc)| Schedule {
                spec: body_json(&doc),
                name,
            })
            .collect();
        Ok(ScheduleList { schedules })
    }

    /// Validates `doc` (`ScheduleSpec::validate`: a 422 naming the field) and stores it as
    /// `name`, creating or replacing. Without `created_at` the schedule is created now: ticks
    /// before the call do not fire.
    pub async fn put_schedule(&self, name: &str, mut doc: Map<String, Value>) -> Result<Schedule> {
        if !doc.contains_key("created_at") {
            doc.insert("created_at".into(), Value::from(unix_now().floor() as i64));
        }
        let raw = serde_json::to_vec(&Value::Object(doc))
            .map_err(|e| Error::invalid("body", e.to_string()))?;
        let stored = ScheduleSpec::from_json(&raw)?.to_json();
        self.fleet.schedule_put(name, &stored).await?;
        Ok(Schedule {
            name: name.to_string(),
            spec: body_json(&stored),
        })
    }

    /// The schedule `name`, or `unknown_schedule`.
    pub async fn schedule(&self, name: &str) -> Result<Schedule> {
        match self.fleet.schedule_get(name).await? {
            Some(doc) => Ok(Schedule {
                name: name.to_string(),
                spec: body_json(&doc),
            }),
            None => Err(Error::not_found(
                "unknown_schedule",
                "no schedule has this name; GET /v1/schedules lists them",
            )),
        }
    }

    /// Deletes the schedule `name`; ticks already enqueued stay in their queue.
    pub async fn delete_schedule(&self, name: &str) -> Result<Deleted> {
        let deleted = self.fleet.schedule_delete(name).await?;
        Ok(Deleted {
            name: name.to_string(),
            deleted,
        })
    }
}
