//! Damaged blobs (every fixture truncated, bytes flipped, random bytes) must give errors from
//! every decoder, never a panic or a hang.

use proptest::prelude::*;

use super::ALL;
use crate::java::Graph;
use crate::{blob_triggers, calendars, job_data};

fn decode_everything(bytes: &[u8]) {
    // The decoders parse first and fail as the parse fails: parse once, decode thrice.
    match Graph::parse(bytes) {
        Ok(graph) => {
            let _ = job_data::from_java(graph.root(), bytes.len());
            if let Some(object) = graph.root().as_object() {
                let _ = calendars::from_java(object, Some("Europe/Berlin"));
                let _ = blob_triggers::from_java(object, Some("Europe/Berlin"), bytes.len());
            }
        }
        Err(_) => {
            let _ = job_data::decode(Some(bytes));
        }
    }
}

/// Every cut of the fixtures (of the larger ones, the first and last 256 bytes and a stride
/// between): a cut stream never parses, and Properties text still decodes or fails cleanly.
#[test]
fn every_truncation_fails_cleanly() {
    for (name, bytes) in ALL {
        let cuts: Vec<usize> = if bytes.len() <= 4096 {
            (0..bytes.len()).collect()
        } else {
            (0..256)
                .chain((256..bytes.len() - 256).step_by(61))
                .chain(bytes.len() - 256..bytes.len())
                .collect()
        };
        for cut in cuts {
            let prefix = &bytes[..cut];
            if name.ends_with(".ser") {
                // The decoders start with this parse.
                assert!(Graph::parse(prefix).is_err(), "{name} cut at {cut} parsed");
            } else {
                let _ = job_data::decode(Some(prefix));
            }
        }
    }
}

/// The fixtures other than the big one and the bomb (whose expansion to the JSON limit takes a
/// while, and is tested on its own).
fn small() -> impl Iterator<Item = &'static [u8]> {
    ALL.iter()
        .filter(|(name, bytes)| bytes.len() <= 4096 && !name.contains("bomb"))
        .map(|(_, bytes)| *bytes)
}

/// Each byte of each small fixture inverted, and set to TC_NULL (where the grammar branches).
#[test]
fn every_byte_changed_fails_cleanly_or_decodes() {
    for bytes in small() {
        let mut copy = bytes.to_vec();
        for i in 0..copy.len() {
            let original = copy[i];
            for value in [!original, 0x70] {
                copy[i] = value;
                decode_everything(&copy);
            }
            copy[i] = original;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_flips_fail_cleanly(
        which in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let fixtures: Vec<&[u8]> = small().collect();
        let mut bytes = which.get(&fixtures).to_vec();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        decode_everything(&bytes);
    }

    #[test]
    fn random_bytes_fail_cleanly(
        tail in prop::collection::vec(any::<u8>(), 0..256),
        java in any::<bool>(),
    ) {
        let mut bytes = if java { crate::java::MAGIC.to_vec() } else { Vec::new() };
        bytes.extend(tail);
        decode_everything(&bytes);
    }
}
