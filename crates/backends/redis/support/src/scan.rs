//! `SCAN` over every node that holds keys: one node on standalone Redis, every primary on a
//! cluster (a `SCAN` answers for the node it reaches only). For operator listings that cannot
//! keep an index of their own, such as the queues written by another process; never on a hot
//! path.

use fred::clients::Client;
use fred::prelude::{ClientLike, ClusterInterface, KeysInterface, Options, Server, Value};

/// `SCAN … COUNT`: keys examined per round trip.
pub const SCAN_COUNT: u32 = 500;

/// The `SCAN MATCH` pattern of every key starting with `stem`: the stem with the glob characters
/// `* ? [ ] \` escaped, then `*`, so a prefix holding glob characters matches only itself.
pub fn pattern_for_stem(stem: &str) -> String {
    let mut pattern = String::with_capacity(stem.len() + 8);
    for c in stem.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

/// A `SCAN MATCH pattern` over every node `client` reaches (each primary of a cluster), one page
/// at a time, so a caller can act on each page (e.g. unlink it) without holding every key.
#[derive(Debug)]
pub struct Scan<'a> {
    client: &'a Client,
    options: Options,
    pattern: String,
    /// The nodes still to scan, last first; `None` is the one node of a standalone server.
    nodes: Vec<Option<Server>>,
    /// The cursor on the current node; `None` before its first page.
    cursor: Option<String>,
}

impl<'a> Scan<'a> {
    /// A scan of `pattern`; `options` apply to every page (timeouts). Fails on a cluster whose
    /// topology is not known yet.
    pub fn new(
        client: &'a Client,
        options: &Options,
        pattern: &str,
    ) -> Result<Self, fred::error::Error> {
        let mut nodes: Vec<Option<Server>> = if client.is_clustered() {
            let state = client.cached_cluster_state().ok_or_else(|| {
                fred::error::Error::new(fred::error::ErrorKind::Cluster, "no cluster state yet")
            })?;
            state.unique_primary_nodes().into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        nodes.reverse();
        Ok(Scan {
            client,
            options: options.clone(),
            pattern: pattern.to_string(),
            nodes,
            cursor: None,
        })
    }

    /// The next page of matching keys (possibly empty), or `None` when every node is done. Keys
    /// that are not UTF-8 are skipped.
    pub async fn next_page(&mut self) -> Result<Option<Vec<String>>, fred::error::Error> {
        let Some(node) = self.nodes.last().cloned() else {
            return Ok(None);
        };
        let scanner = self.client.with_options(&Options {
            cluster_node: node,
            ..self.options.clone()
        });
        let cursor = self.cursor.take().unwrap_or_else(|| "0".to_string());
        let page: Value = scanner
            .scan_page(cursor, self.pattern.clone(), Some(SCAN_COUNT), None)
            .await?;
        let (next, keys) = parse_page(page)?;
        if next == "0" {
            self.nodes.pop();
        } else {
            self.cursor = Some(next);
        }
        Ok(Some(keys))
    }
}

/// Every key matching `pattern` on every node `client` reaches, as text (see [`Scan`]).
pub async fn scan_keys(
    client: &Client,
    options: &Options,
    pattern: &str,
) -> Result<Vec<String>, fred::error::Error> {
    let mut scan = Scan::new(client, options, pattern)?;
    let mut found = Vec::new();
    while let Some(page) = scan.next_page().await? {
        found.extend(page);
    }
    Ok(found)
}

/// `[cursor, [keys]]`.
fn parse_page(page: Value) -> Result<(String, Vec<String>), fred::error::Error> {
    let bad = || {
        fred::error::Error::new(
            fred::error::ErrorKind::Parse,
            "SCAN did not answer [cursor, [keys]]",
        )
    };
    let Value::Array(mut parts) = page else {
        return Err(bad());
    };
    if parts.len() != 2 {
        return Err(bad());
    }
    let keys = parts.pop().ok_or_else(bad)?;
    let cursor = parts.pop().ok_or_else(bad)?.as_string().ok_or_else(bad)?;
    let keys = match keys {
        Value::Array(keys) => keys.into_iter().filter_map(|k| k.into_string()).collect(),
        Value::Null => Vec::new(),
        _ => return Err(bad()),
    };
    Ok((cursor, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(pattern_for_stem("p:q:"), "p:q:*");
        assert_eq!(pattern_for_stem("a*b?[c]\\:"), "a\\*b\\?\\[c\\]\\\\:*");
    }

    #[test]
    fn pages_parse() {
        let page = Value::Array(vec![
            Value::from("17"),
            Value::Array(vec![Value::from("a"), Value::from("b")]),
        ]);
        assert_eq!(
            parse_page(page).expect("page"),
            ("17".to_string(), vec!["a".to_string(), "b".to_string()])
        );
        assert!(parse_page(Value::from("x")).is_err());
    }
}
