//! What Redis did for a stretch of work, from `INFO commandstats`: the calls and server time per
//! request say how much of a gateway request is Redis's and how many round trips it makes.

use std::collections::BTreeMap;

use fred::prelude::ClientLike;
use fred::types::InfoKind;

/// Calls and microseconds of server time, per command.
#[derive(Debug, Clone, Default)]
pub(super) struct CommandStats(BTreeMap<String, (u64, u64)>);

impl CommandStats {
    /// The server's counters now (`None` when it cannot be asked).
    pub(super) async fn now(url: &str) -> Option<Self> {
        let c = crate::floor::client(url).await.ok()?;
        let info: String = c.info(Some(InfoKind::CommandStats)).await.ok()?;
        let _ = c.quit().await;
        Some(Self::parse(&info))
    }

    /// `cmdstat_get:calls=2,usec=15,usec_per_call=7.50,...` lines.
    fn parse(info: &str) -> Self {
        let mut out = BTreeMap::new();
        for line in info.lines() {
            let Some((name, fields)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let field = |key: &str| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            if let (Some(calls), Some(usec)) = (field("calls"), field("usec")) {
                out.insert(name.to_string(), (calls, usec));
            }
        }
        Self(out)
    }

    /// "Redis per request: N commands (evalsha 1.0, …), M µs server time" since `before`,
    /// leaving out the `INFO` that read the counters. Commands a script runs count as their own
    /// (and inside the script's time), as `INFO commandstats` counts them.
    pub(super) fn per_request(
        before: Option<&Self>,
        after: Option<&Self>,
        requests: u64,
    ) -> String {
        let (Some(b), Some(a)) = (before, after) else {
            return "Redis per request: unknown".into();
        };
        if requests == 0 {
            return "Redis per request: unknown".into();
        }
        let n = requests as f64;
        let (mut calls, mut usec) = (0u64, 0u64);
        let mut parts = Vec::new();
        for (name, (c, u)) in &a.0 {
            if name == "info" {
                continue;
            }
            let (c0, u0) = b.0.get(name).copied().unwrap_or_default();
            let (dc, du) = (c.saturating_sub(c0), u.saturating_sub(u0));
            if dc == 0 {
                continue;
            }
            calls += dc;
            usec += du;
            parts.push((dc, format!("{name} {:.2}", dc as f64 / n)));
        }
        parts.sort_by_key(|p| std::cmp::Reverse(p.0));
        let list: Vec<String> = parts.into_iter().take(6).map(|(_, s)| s).collect();
        format!(
            "Redis per request: {:.2} commands, those run by scripts included ({}), {:.1} µs \
             server time",
            calls as f64 / n,
            list.join(", "),
            usec as f64 / n
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_commandstats_and_divides_the_difference() {
        let before = CommandStats::parse(
            "# Commandstats\r\ncmdstat_get:calls=2,usec=10,usec_per_call=5.00\r\n",
        );
        let after = CommandStats::parse(
            "# Commandstats\r\ncmdstat_get:calls=6,usec=30,usec_per_call=5.00,rejected_calls=0\r\n\
             cmdstat_evalsha:calls=2,usec=40,usec_per_call=20.00\r\n\
             cmdstat_info:calls=9,usec=900,usec_per_call=100.00\r\n",
        );
        assert_eq!(
            CommandStats::per_request(Some(&before), Some(&after), 2),
            "Redis per request: 3.00 commands, those run by scripts included (get 2.00, evalsha \
             1.00), 30.0 µs server time"
        );
        assert_eq!(
            CommandStats::per_request(None, Some(&after), 2),
            "Redis per request: unknown"
        );
    }
}
