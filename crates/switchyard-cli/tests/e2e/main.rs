//! End-to-end tests: the real `switchyard` binary on a free port, over HTTP.

mod common;

mod bad_requests;
mod durability;
mod hostile;
mod limits;
mod ops;
mod redis;
mod security;
mod shutdown;
mod stats;
mod streams;
mod walkthrough;
