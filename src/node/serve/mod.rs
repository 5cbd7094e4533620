//! The node's servers: the client API over QUIC (status, watch, step-down, switchover,
//! metrics) and the HTTP endpoint for load balancers and Prometheus.

pub mod api;
pub mod http;
pub mod http_routes;
pub mod http_slots;
pub mod switchover;
