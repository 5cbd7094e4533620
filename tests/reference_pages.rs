//! The manual's generated reference pages (docs/reference/) stay true to the code: each
//! page is generated here from the source of truth and compared with the file, so a
//! config key, command-line option or metric that changes without its page fails
//! the suite. `BLESS=1 cargo test --test reference_pages` rewrites the pages.
//!
//! - `docs/reference/configuration.md`: the config types in src/ read with syn, every
//!   description a field's doc comment, the defaults from the crate's own config
//!   loader ([`configuration`]);
//! - `docs/reference/command-line.md`: the clap definition, `bully::cli::Cli`
//!   ([`command_line`]);
//! - `docs/reference/metrics.md`: what `/metrics` serves ([`metrics`]).

#[path = "reference_pages/command_line.rs"]
mod command_line;
#[path = "reference_pages/config_defaults.rs"]
mod config_defaults;
#[path = "reference_pages/config_model.rs"]
mod config_model;
#[path = "reference_pages/config_source.rs"]
mod config_source;
#[path = "reference_pages/configuration.rs"]
mod configuration;
#[path = "reference_pages/fresh.rs"]
mod fresh;
#[path = "reference_pages/markdown.rs"]
mod markdown;
#[path = "reference_pages/metrics.rs"]
mod metrics;

#[test]
fn the_configuration_page_matches_the_config_types() {
    fresh::check(configuration::PAGE, &configuration::page());
}

#[test]
fn the_command_line_page_matches_the_clap_definition() {
    fresh::check(command_line::PAGE, &command_line::page());
}

#[test]
fn the_metrics_page_matches_what_metrics_serves() {
    fresh::check(metrics::PAGE, &metrics::page());
}
