//! One module per group of verbs.

pub mod access;
pub mod definitions;
pub mod docs;
pub mod groups;
pub mod import;
pub mod jobs;
pub mod schedule;
pub mod services;
pub mod submit;
pub mod tasks;
pub mod webhooks;
pub mod workers;

/// A name as one URL path segment (percent-encoding anything but unreserved characters).
pub fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
