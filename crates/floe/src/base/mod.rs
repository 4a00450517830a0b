//! The base layer: what every layer above may use and that uses nothing of floe's.
//!
//! - [`error`]: one error type; every variant names what to fix.
//! - [`properties`]: every table property floe reads, declared once, typed, with its default
//!   and validation.
//! - [`secrets`]: the one masking function for everything printed.
//! - [`fault`]: fault injection points for crash tests.
//! - [`cost`]: what every operation reports ([`cost::Cost`] through [`cost::Costed`], one
//!   [`cost::Progress`] event), so a scheduler weighs operations alike.
//! - [`server`]: the one HTTP server (axum) and its Prometheus text exposition.

pub mod cost;
pub mod error;
pub mod fault;
pub mod properties;
pub mod secrets;
pub mod server;
