//! The key layouts (ADR 0092): the seed's `<prefix>:<run_id>` (run id verbatim), and the cluster
//! layout `<prefix>:{run:<quote(run_id)>}`, whose hash tag puts a run's stream and its wake channel
//! in one slot (the tag rules are `switchyard_redis_support::keys`').

use switchyard_redis_support::keys::{KeyLayout, LayoutRules, hash_tag};

/// The settings a bridge's layout is checked under.
pub(crate) const RULES: LayoutRules<'static> = LayoutRules {
    layout_setting: "stream_bridge.layout",
    prefix_setting: "stream_bridge.key_prefix",
    seed_on_cluster: Some(
        "the seed layout needs a multi-key XREAD across runs, which a cluster refuses",
    ),
};

pub(crate) fn stream_key(prefix: &str, layout: KeyLayout, run_id: &str) -> String {
    match layout {
        KeyLayout::Seed => format!("{prefix}:{run_id}"),
        KeyLayout::Cluster => format!("{prefix}:{}", hash_tag("run", run_id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(stream_key("p", KeyLayout::Seed, "r{1}"), "p:r{1}");
        assert_eq!(stream_key("p", KeyLayout::Cluster, "r"), "p:{run:r}");
        assert_eq!(
            stream_key("p", KeyLayout::Cluster, "}{%7B:"),
            "p:{run:%7D%7B%257B%3A}"
        );
        assert!(KeyLayout::resolve(Some(KeyLayout::Seed), true, "p", &RULES).is_err());
        assert!(KeyLayout::resolve(Some(KeyLayout::Cluster), false, "a{b", &RULES).is_err());
    }
}
