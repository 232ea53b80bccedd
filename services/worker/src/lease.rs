//! The worker's lease, as the worker counts it on its own clock.
//!
//! The database ends a lease its length (`worker.lease_ms`, [`workers::LEASE`] by default, longer
//! while heartbeats are slow) after the heartbeat that renewed it; the worker counts from before
//! it sent that heartbeat, so its count always ends first. Three deadlines
//! follow from one renewal, earliest first:
//!
//! ```text
//!   sent ─────────────────────────────────────────────▶ sent + LEASE (the database's end, at least)
//!          worker stops its attempts ▲      guard kills ▲   ◀─ GUARD_MARGIN ─▶
//!                      (SELF_MARGIN before the guard)
//! ```
//!
//! The worker stops its attempts itself first (they end as lost, not failed) and starts none
//! while the lease is not held; its guard ([`crate::executor::guard`]) kills whatever is left if
//! the worker cannot act. When the database server refuses the worker while it holds its lease,
//! the lease holds on under a mark the broker keeps for recovery to see, each answered check of
//! it for [`grace::MARK_LEASE`], never past [`workers::RESTART_GRACE`] from the first refusal
//! (see `crate::refusal_grace` and `chime_core::bus::grace`). Without its guard
//! (killed), the worker holds no lease at all: it ends its attempts and stops, to be started
//! again with a new guard.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use chime_core::bus::grace;
use chime_core::store::workers;

use crate::executor::guard::boot_clock_ns;
use crate::executor::sandbox::Sandbox;

/// How long before its guard the worker stops its attempts itself.
const SELF_MARGIN: Duration = Duration::from_millis(300);

/// How many times the configured lease a worker asks for at most when its heartbeats are slow.
const MAX_STRETCH: u32 = 8;

/// The lease one worker holds.
#[derive(Debug)]
pub struct Lease {
    /// When the guard kills (boot-clock nanoseconds): the lease's end less the guard's margin.
    guard_deadline: AtomicI64,
    /// Counts the times the worker found its lease run out: an attempt that started under an
    /// earlier count has lost it.
    lapses: AtomicU64,
    /// Set for good once the guard is found gone: no lease is held without it.
    guard_gone: AtomicBool,
    /// When the heartbeat that last renewed the lease was sent (boot-clock nanoseconds).
    last_renewal: AtomicI64,
    /// `worker.lease_ms`.
    configured: Duration,
    sandbox: Arc<Sandbox>,
}

fn nanos(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
}

impl Lease {
    /// A lease not yet held, of `configured` length per heartbeat; `sandbox` holds the guard
    /// to tell.
    pub fn new(sandbox: Arc<Sandbox>, configured: Duration) -> Self {
        Self {
            configured,
            guard_deadline: AtomicI64::new(i64::MIN),
            lapses: AtomicU64::new(0),
            guard_gone: AtomicBool::new(false),
            last_renewal: AtomicI64::new(i64::MIN),
            sandbox,
        }
    }

    /// Now, on the clock the lease is counted on.
    pub fn now() -> i64 {
        boot_clock_ns()
    }

    /// Whether the worker holds its lease now: it may start and run attempts. Never once its
    /// guard is gone: an attempt it started could outlive a freeze of the worker unkilled.
    pub fn held(&self) -> bool {
        !self.guard_gone.load(Ordering::Acquire) && Self::now() < self.self_deadline()
    }

    /// Looks whether the guard is still there; true the first time it is found gone (the lease
    /// is then never held again).
    pub fn guard_lost(&self) -> bool {
        !self.sandbox.guard_alive() && !self.guard_gone.swap(true, Ordering::AcqRel)
    }

    /// Whether the guard was found gone.
    pub fn without_guard(&self) -> bool {
        self.guard_gone.load(Ordering::Acquire)
    }

    /// How long the lease is held from now (zero if it is not).
    pub fn remaining(&self) -> Duration {
        let left = self.self_deadline().saturating_sub(Self::now());
        Duration::from_nanos(u64::try_from(left).unwrap_or(0))
    }

    /// The configured lease (`worker.lease_ms`).
    pub fn configured(&self) -> Duration {
        self.configured
    }

    /// The longest heartbeat round trip a lease of `length` bears: heartbeats go one after
    /// another, each counted from when it was sent, so the next answer must come before the
    /// worker's own deadline on the last one, `length - GUARD_MARGIN - SELF_MARGIN` after it
    /// was sent: two round trips.
    pub fn round_trip_budget(length: Duration) -> Duration {
        length.saturating_sub(workers::GUARD_MARGIN + SELF_MARGIN) / 2
    }

    /// The lease to ask for when the slowest recent heartbeat took `slowest`: the configured
    /// one, or longer so that it bears round trips half again as slow (PostgreSQL slow for
    /// every worker must not end every attempt), at most [`MAX_STRETCH`] times the configured.
    pub fn length_for(&self, slowest: Duration) -> Duration {
        (slowest * 3 + workers::GUARD_MARGIN + SELF_MARGIN)
            .max(self.configured)
            .min(self.configured * MAX_STRETCH)
    }

    /// A heartbeat sent at `sent_at` renewed the lease for `length` (or the registration made
    /// it). A renewal of a lease that had run out counts as a lapse: an attempt taken hold of
    /// before it, even one whose start committed while the lease was out, may have been
    /// recovered meanwhile.
    pub fn renewed(&self, sent_at: i64, length: Duration) {
        if !self.held() {
            self.lapsed();
        }
        self.last_renewal.fetch_max(sent_at, Ordering::AcqRel);
        self.extend_to(sent_at + nanos(length) - nanos(workers::GUARD_MARGIN));
    }

    /// Whether a heartbeat sent after `at` renewed the lease.
    pub fn renewed_since(&self, at: i64) -> bool {
        self.last_renewal.load(Ordering::Acquire) > at
    }

    /// A check of the worker's grace mark sent at `sent_at` was answered, in a refusal that
    /// began at `first_refusal`: the lease holds [`grace::MARK_LEASE`] from the check, never past
    /// [`workers::RESTART_GRACE`] from the first refusal. False (and nothing changes) if the lease
    /// is not held now: a grace only prolongs a lease, it never takes one up again.
    pub fn grace_renewed(&self, first_refusal: i64, sent_at: i64) -> bool {
        if !self.held() {
            return false;
        }
        let cap = first_refusal + nanos(workers::RESTART_GRACE) - nanos(workers::GUARD_MARGIN);
        self.extend_to((sent_at + nanos(grace::MARK_LEASE)).min(cap));
        true
    }

    /// Waits until the lease is held (at once if it is): an attempt is started only under it.
    pub async fn wait_held(&self) {
        while !self.held() {
            tokio::time::sleep(workers::HEARTBEAT_INTERVAL / 5).await;
        }
    }

    /// When the worker stops its attempts itself.
    fn self_deadline(&self) -> i64 {
        self.guard_deadline
            .load(Ordering::Acquire)
            .saturating_sub(nanos(SELF_MARGIN))
    }

    fn extend_to(&self, deadline: i64) {
        let before = self.guard_deadline.fetch_max(deadline, Ordering::AcqRel);
        if deadline > before && !self.sandbox.lease_ends(deadline) && !self.sandbox.guard_alive() {
            self.guard_gone.store(true, Ordering::Release);
        }
    }

    /// Records that the worker found its lease run out.
    pub fn lapsed(&self) {
        self.lapses.fetch_add(1, Ordering::AcqRel);
    }

    /// The count an attempt starting now keeps, to ask [`Lease::lost_since`] later.
    pub fn mark(&self) -> u64 {
        self.lapses.load(Ordering::Acquire)
    }

    /// Whether the lease ran out since `mark`, or is not held now.
    pub fn lost_since(&self, mark: u64) -> bool {
        self.lapses.load(Ordering::Acquire) != mark || !self.held()
    }
}
