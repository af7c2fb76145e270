//! End-to-end tests: the real `switchyard` binary on a free port, over HTTP.

mod common;
mod contract;

mod bad_requests;
mod bounds;
mod bridge_bounds;
mod durability;
mod edge_abuse;
mod hostile;
mod isolation;
mod limits;
mod logs;
mod maintenance;
mod memory;
mod multitask;
mod openapi;
mod operator;
mod ops;
mod outage;
mod postgres;
mod readiness;
mod redis;
mod run_cancel;
mod schedules;
mod security;
mod shutdown;
mod startup;
mod stats;
mod streams;
mod tasks;
mod tickets;
mod typescript;
mod walkthrough;
mod webhooks;
mod worker_api;
mod worker_faults;
