//! The operator's commands the node runs: hooks on role changes and the health check,
//! both through `crate::shell` (a timeout that kills the process group) with the `BULLY_*`
//! variables of `environment`.

pub mod environment;
pub mod estimate;
pub mod health;
pub mod hooks;
