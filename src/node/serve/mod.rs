//! The node's servers: the client API over QUIC (status, watch, step-down, switchover
//! now or at a set time, metrics), the HTTP endpoint for load balancers and Prometheus,
//! and the unix socket the host's keepers (`bully run`) learn the lease from
//! (`keepers`); `pause_sync` spreads the maintenance pause between members; `forward`
//! passes what only the coordinator serves from any member to it.

pub mod api;
pub mod forward;
pub mod http;
pub mod http_answer;
pub mod http_auth;
pub mod http_cluster;
pub mod http_conn;
pub mod http_coordinator;
pub mod http_history;
pub mod http_patroni;
pub mod http_query;
pub mod http_reply;
pub mod http_routes;
pub mod http_slots;
pub mod http_tls;
pub mod http_write;
pub mod keepers;
pub mod pause_sync;
pub mod scheduled_switchover;
pub mod switchover;
