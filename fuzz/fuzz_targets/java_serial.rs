//! The Java serialization reader and the Quartz layers on it, on arbitrary bytes: they may
//! refuse the input, never panic, hang or allocate without bound.
#![no_main]

use chime_quartz_import::java::Graph;
use chime_quartz_import::{blob_triggers, calendars, job_data};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Sniffing: Java streams, Properties text and everything else.
    let _ = job_data::decode(Some(data));
    let Ok(graph) = Graph::parse(data) else {
        return;
    };
    let root = graph.root();
    let _ = job_data::from_java(root);
    if let Some(object) = root.as_object() {
        let _ = calendars::from_java(object, Some("Europe/Berlin"));
        let _ = calendars::from_java(object, None);
        let _ = blob_triggers::from_java(object, Some("GMT+05:30"));
    }
});
