//! The group commit's cached writes (ADR 0382): the statements a batch of recorded tasks is made
//! of (the merged submit, the pop, and the merged ack of recorded deliveries with the end of their
//! records and the trim) as constant SQL texts taking their rows in JSON parameters. A batch's
//! string made of such writes only is then the same text whenever the batch holds the same kinds
//! of writes in the same order, and the writer runs it from sqlx's statement cache instead of
//! preparing it again, with the triggers it fires: for recorded tasks the preparing cost the
//! writer more than the running.

use std::sync::LazyLock;

use serde_json::Value;

use super::*;
use crate::tasks::TRIM_SQL;

/// The merged submit of bodies to run now: one row of `switchyard_task_push` per element of
/// the JSON array `?1`, each `[name, tier, body (hex), id, max_attempts, last_error]`.
const SUBMIT_NOW: &str = "INSERT INTO switchyard_task_push \
     (name, tier, body, task_id, max_attempts, last_error) \
     SELECT j.value ->> 0, j.value ->> 1, unhex(j.value ->> 2), j.value ->> 3, j.value ->> 4, \
     j.value ->> 5 FROM json_each(?1) AS j ORDER BY j.key";

/// The same through `switchyard_task_submit`, each element with `at` and `delay` after.
const SUBMIT_LATER: &str = "INSERT INTO switchyard_task_submit \
     (name, tier, body, task_id, max_attempts, last_error, at, delay) \
     SELECT j.value ->> 0, j.value ->> 1, unhex(j.value ->> 2), j.value ->> 3, j.value ->> 4, \
     j.value ->> 5, j.value ->> 6, j.value ->> 7 FROM json_each(?1) AS j ORDER BY j.key";

/// The merged ack of queue `?1`, the receipts in the JSON array `?2` and, at the same index in
/// the JSON array `?3`, the result (hex) to store or null, in three statements (one savepoint of
/// the batch): the records of the recorded deliveries end (`completed` with the result, or
/// `cancelled` without one when a cancel reached the delivery; the delivery's progress kept on
/// the record; only current deliveries, their row still in `queue_processing`), then the
/// `DELETE` acks every receipt, then the queue's ended records are trimmed (ADR 0380). Rows: one
/// `(receipt, state, task_id)` per record ended, then one `task_id` per receipt acked. The end
/// trigger appends each end's event and counts it.
static ACK: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            // The current recorded deliveries first (the receipts in order, each found by its
            // key), then their records by receipt: left to itself, the planner walks the
            // queue's running records and its reservations by name.
            "WITH x AS MATERIALIZED (SELECT a.value AS r, unhex(?3 ->> a.key) AS res, p.progress ",
            "FROM json_each(?2) AS a CROSS JOIN queue_processing p ",
            "ON p.name = ?1 AND p.task_id = a.value WHERE substr(a.value, 1, 1) = 't') ",
            "UPDATE switchyard_tasks AS t INDEXED BY switchyard_tasks_receipt SET ",
            "state = CASE WHEN t.cancel_requested <> 0 THEN 'cancelled' ELSE 'completed' END, ",
            "result = CASE WHEN t.cancel_requested <> 0 THEN NULL ELSE x.res END, ",
            "cancel_requested = 0, progress = x.progress, finished_at = ",
            now_sql!(),
            ", touched_at = ",
            now_sql!(),
            " FROM x WHERE t.name = ?1 AND t.state = 'running' AND t.receipt = x.r ",
            "RETURNING receipt, state, task_id;\n",
            "DELETE FROM queue_processing WHERE name = ?1 AND task_id IN ",
            "(SELECT value FROM json_each(?2)) RETURNING task_id;\n",
            "{trim}"
        ),
        trim = TRIM_SQL
    )
});

/// The cached write that acks `receipts` of `name` (one merged group of ackers, some of them
/// recorded), storing each recorded receipt's result from `results` (same index; null: none).
pub(super) fn ack(name: &str, receipts: Vec<Value>, results: Vec<Value>, reply: Reply) -> Write {
    Write {
        op: "queue_ack",
        key: name.to_owned(),
        sql: Cow::Borrowed(ACK.as_str()),
        stmts: 3,
        cached: true,
        args: vec![
            Arg::Text(name.to_owned()),
            Arg::Text(Value::Array(receipts).to_string()),
            Arg::Text(Value::Array(results).to_string()),
        ],
        reply,
    }
}

/// The text and argument of the cached write that submits `rows` (eight values each, see
/// `queue::submit_args`), or `None` when a value has no JSON form (a time that is not finite):
/// the rows are then a statement of the batch's string.
pub(super) fn submit(rows: &[Arg]) -> Option<(&'static str, Arg)> {
    let now = rows
        .chunks(SUBMIT_COLUMNS)
        .all(|r| matches!(r.get(SUBMIT_COLUMNS - 2..), Some([Arg::Null, Arg::Null])));
    let columns = if now {
        SUBMIT_COLUMNS - 2
    } else {
        SUBMIT_COLUMNS
    };
    let mut out = Vec::with_capacity(rows.len() / SUBMIT_COLUMNS);
    for row in rows.chunks(SUBMIT_COLUMNS) {
        let values: Option<Vec<Value>> = row.iter().take(columns).map(json_of).collect();
        out.push(Value::Array(values?));
    }
    let sql = if now { SUBMIT_NOW } else { SUBMIT_LATER };
    Some((sql, Arg::Text(Value::Array(out).to_string())))
}

/// A value as JSON: bytes as hex (`unhex` reads them back), a time that is not finite
/// as `None`.
fn json_of(a: &Arg) -> Option<Value> {
    Some(match a {
        Arg::Text(s) => Value::String(s.clone()),
        Arg::Blob(b) => Value::String(hex::encode(b)),
        Arg::Real(v) => Value::from(serde_json::Number::from_f64(*v)?),
        Arg::Int(v) => Value::from(*v),
        Arg::Null => Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_that_is_not_finite_has_no_json_form() {
        let mut row = vec![
            Arg::Text("q".into()),
            Arg::Text("normal".into()),
            Arg::Blob(b"{}".to_vec()),
            Arg::Text("a".into()),
            Arg::Null,
            Arg::Null,
            Arg::Real(f64::NAN),
            Arg::Null,
        ];
        assert!(submit(&row).is_none());
        row[6] = Arg::Real(1.5);
        let json = r#"[["q","normal","7b7d","a",null,null,1.5,null]]"#;
        assert!(matches!(submit(&row), Some((SUBMIT_LATER, Arg::Text(j))) if j == json));
        row[6] = Arg::Null;
        let json = r#"[["q","normal","7b7d","a",null,null]]"#;
        assert!(matches!(submit(&row), Some((SUBMIT_NOW, Arg::Text(j))) if j == json));
    }
}
