//! The tail of a process's output: the last `limit` bytes of stdout and stderr, interleaved in the
//! order they were read.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A bounded buffer that keeps the most recent bytes; shared by the stdout and stderr readers.
#[derive(Clone, Debug)]
pub struct OutputTail {
    inner: Arc<Mutex<VecDeque<u8>>>,
    writes: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    limit: usize,
}

impl OutputTail {
    /// A tail of at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(VecDeque::with_capacity(limit.min(8192)))),
            writes: Arc::new(AtomicU64::new(0)),
            bytes: Arc::new(AtomicU64::new(0)),
            limit,
        }
    }

    /// Appends bytes, dropping the oldest beyond the limit.
    pub fn push(&self, bytes: &[u8]) {
        let Ok(mut buffer) = self.inner.lock() else {
            return;
        };
        // Counted under the lock, so a snapshot's text and count agree.
        self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let keep = bytes.len().min(self.limit);
        let bytes = &bytes[bytes.len() - keep..];
        let overflow = (buffer.len() + bytes.len()).saturating_sub(self.limit);
        buffer.drain(..overflow);
        buffer.extend(bytes);
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// The tail as text with how many bytes were pushed in all, read together.
    pub fn snapshot(&self) -> (String, u64) {
        let Ok(buffer) = self.inner.lock() else {
            return (String::new(), 0);
        };
        let total = self.bytes.load(Ordering::Relaxed);
        (tail_text(&buffer), total)
    }

    /// How many times bytes were pushed: a follower compares it to know whether the tail changed.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// The tail as text; a character cut at the start is dropped, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        let Ok(buffer) = self.inner.lock() else {
            return String::new();
        };
        tail_text(&buffer)
    }
}

fn tail_text(buffer: &VecDeque<u8>) -> String {
    let (front, back) = buffer.as_slices();
    let mut bytes = Vec::with_capacity(buffer.len());
    bytes.extend_from_slice(front);
    bytes.extend_from_slice(back);
    // skip UTF-8 continuation bytes left by the cut
    let start = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count();
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes() {
        let tail = OutputTail::new(5);
        tail.push(b"hello ");
        tail.push(b"world");
        assert_eq!(tail.text(), "world");
        tail.push(b"!");
        assert_eq!(tail.text(), "orld!");
        tail.push(b"0123456789");
        assert_eq!(tail.text(), "56789");
    }

    #[test]
    fn drops_a_character_cut_in_half() {
        let tail = OutputTail::new(4);
        tail.push("aé€".as_bytes()); // 1 + 2 + 3 bytes; the cut leaves half of é
        assert_eq!(tail.text(), "€");
    }
}
