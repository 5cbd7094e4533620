//! What the node makes known after each step of the runtime: the status watch, the
//! counters, the led-epoch watch and the hooks, in that order (`publisher`), and the
//! counters rendered for Prometheus (`exposition`).

pub mod exposition;
pub mod publisher;
