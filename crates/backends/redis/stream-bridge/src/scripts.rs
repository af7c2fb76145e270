//! The bridge's Lua scripts, one `.lua` file each under `scripts/` (their headers name KEYS, ARGV
//! and the reply). Each is atomic like the seed's MULTI blocks, and unlike a MULTI on a shared
//! fred client it pipelines with concurrent callers (a fred transaction drains its client).

use switchyard_redis_support::LuaScript;

/// The seed layout's publish: `XADD … MAXLEN` and `EXPIRE` in one step.
pub(crate) fn publish() -> LuaScript {
    LuaScript::new("publish.lua", include_str!("scripts/publish.lua"))
}

/// The cluster layout's publish: [`publish`] plus the wake-up `SPUBLISH` (ADR 0093).
pub(crate) fn publish_wake() -> LuaScript {
    LuaScript::new("publish_wake.lua", include_str!("scripts/publish_wake.lua"))
}

/// A subscriber's atomic snapshot of one stream.
pub(crate) fn snapshot() -> LuaScript {
    LuaScript::new("snapshot.lua", include_str!("scripts/snapshot.lua"))
}
