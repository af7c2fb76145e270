//! Redis server time per command, from `INFO commandstats`: what a command costs inside Redis,
//! apart from the network and the client. The append script's cost there caps one Redis's
//! append rate however many clients write, so the store suite reports it next to the floor's
//! SET (issue 18).

use fred::prelude::ClientLike;
use fred::types::InfoKind;

use crate::floor::client;

/// Calls and microseconds of one command since the server's last stats reset.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct CmdStat {
    pub calls: u64,
    pub usec: u64,
}

impl CmdStat {
    /// Microseconds per call between two readings (`None` when nothing was called).
    pub fn per_call_since(self, before: CmdStat) -> Option<f64> {
        let calls = self.calls.checked_sub(before.calls)?;
        let usec = self.usec.checked_sub(before.usec)?;
        (calls > 0).then(|| usec as f64 / calls as f64)
    }
}

/// `cmdstat_<command>` of an `INFO commandstats` reply (lower-case command name).
pub(crate) fn parse(info: &str, command: &str) -> CmdStat {
    let lead = format!("cmdstat_{command}:");
    let Some(line) = info
        .lines()
        .find_map(|l| l.trim().strip_prefix(lead.as_str()))
    else {
        return CmdStat::default();
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    CmdStat {
        calls: field("calls"),
        usec: field("usec"),
    }
}

/// The current stats of `commands` on the server at `url` (defaults when unreadable).
pub(crate) async fn read(url: &str, commands: &[&str]) -> Vec<CmdStat> {
    let info = match client(url).await {
        Ok(c) => {
            let info: Option<String> = c.info(Some(InfoKind::CommandStats)).await.ok();
            let _ = c.quit().await;
            info.unwrap_or_default()
        }
        Err(_) => String::new(),
    };
    commands.iter().map(|c| parse(&info, c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_and_usec() {
        let info = "# Commandstats\r\ncmdstat_set:calls=10,usec=7,usec_per_call=0.70,rejected_calls=0,failed_calls=0\r\ncmdstat_evalsha:calls=4,usec=60,usec_per_call=15.00,rejected_calls=0\r\n";
        assert_eq!(parse(info, "set"), CmdStat { calls: 10, usec: 7 });
        let after = parse(info, "evalsha");
        assert_eq!(after, CmdStat { calls: 4, usec: 60 });
        let before = CmdStat { calls: 2, usec: 20 };
        assert_eq!(after.per_call_since(before), Some(20.0));
        assert_eq!(after.per_call_since(after), None);
        assert_eq!(parse(info, "get"), CmdStat::default());
    }
}
