#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod checkpoint_cache;
pub mod event_store;
pub mod fleet;
pub mod harness;

#[doc = include_str!(concat!(env!("OUT_DIR"), "/guarantees.md"))]
pub mod guarantees {
    /// One guarantee of a port: its stable slug (what docs, comments and ADRs cite), its
    /// position in the port's list, its title and the cases that pin it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Guarantee {
        /// Stable name, `area.rule` (`queue.delayed`).
        pub slug: &'static str,
        /// Position in the port's list of guarantees.
        pub number: u32,
        /// The title of its bullet.
        pub title: &'static str,
        /// The conformance cases (functions of the port's suite module) that pin it.
        pub cases: &'static [&'static str],
    }

    include!(concat!(env!("OUT_DIR"), "/guarantees.rs"));
}
pub mod stream_bridge;
pub mod tasks;

#[doc(hidden)]
pub use tokio as __tokio;
