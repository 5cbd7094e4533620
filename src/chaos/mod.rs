//! `bully chaos`: break a real cluster on a seeded schedule, check I1–I5, measure.

pub mod relay;
