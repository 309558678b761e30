//! Integration tests: the real server on a random loopback port, over a
//! fresh PostgreSQL database per test (`#[sqlx::test]`, migrations applied).

mod audit;
mod browser;
mod caching;
mod cells;
mod clusters;
mod commands;
mod connections;
mod crawlers;
mod deploy;
mod encodings;
mod extensions;
mod failures;
mod folding;
mod helpers;
mod html_view;
mod import;
mod index;
mod indexnow;
mod migrations;
mod news;
mod operations;
mod pages;
mod proxy;
mod receiver;
mod scale;
mod schema;
mod sites;
mod standbys;
mod startup;
mod submit;
mod tenants;
mod trust;
mod write_api;
mod writes;
