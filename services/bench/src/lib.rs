//! chime-bench: the benchmarks behind `chime bench …`. Each prints one
//! machine-readable line of figures; none ever fails on time.

pub mod deps;
pub mod fire;
pub mod installation;
pub mod lag;
pub mod pickup;
pub mod recovery;
pub mod schedule;
pub mod soak;
pub mod submit;
pub mod tasks;
