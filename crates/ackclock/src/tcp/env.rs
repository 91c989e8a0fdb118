//! What protocol routines may touch besides their own TCB: the time, the configuration,
//! the counters, and the way out (pool, interface, transmit batch). One struct, so that
//! input, output and timer code borrow the stack's parts disjointly.

use super::config::TcpConfig;
use super::stats::Counters;
use super::trace::Trace;
use crate::buf::Pool;
use crate::iface::Interface;
use crate::phy::Batch;
use crate::time::{Duration, Instant};

pub(crate) struct Env<'a> {
    pub now: Instant,
    pub config: &'a TcpConfig,
    pub counters: &'a mut Counters,
    pub challenge: &'a mut ChallengeLimiter,
    pub pool: &'a Pool,
    pub iface: &'a mut Interface,
    pub tx: &'a mut Batch,
    pub trace: &'a mut Trace,
}

/// RFC 5961 §7: challenge ACKs are rate limited stack-wide, `limit` per second on average.
///
/// A fixed stack-wide count per second is a side channel (CVE-2016-5696, Cao et al., "Off-Path
/// TCP Exploits", 2016): an off-path attacker spends part of the count with its own
/// connection, and how many challenge ACKs are left tells it whether a spoofed segment drew
/// one, which reveals a connection's 4-tuple and then its sequence numbers. As Linux does
/// since 4.7, each second's budget is drawn afresh from [⌈limit/2⌉, ⌈limit/2⌉ + limit), so
/// the count left says nothing precise. The draw is a keyed PRF (SipHash-2-4 of a counter)
/// under a key derived from the stack's seed: unpredictable in a real stack, reproducible in
/// a simulation.
#[derive(Debug)]
pub(crate) struct ChallengeLimiter {
    key: [u64; 2],
    /// Seconds started so far (the PRF's input).
    windows: u64,
    window_start: Option<Instant>,
    /// Challenge ACKs left in the current second.
    left: u32,
}

impl ChallengeLimiter {
    pub fn new(key: [u64; 2]) -> ChallengeLimiter {
        ChallengeLimiter { key, windows: 0, window_start: None, left: 0 }
    }

    /// The budget of a new second: ⌈limit/2⌉ plus a uniform draw below `limit` (Linux:
    /// `half + prandom_u32_max(ack_limit)`).
    fn budget(&mut self, limit: u32) -> u32 {
        use core::hash::Hasher;
        if limit == 0 {
            return 0;
        }
        let mut h = super::hash::SipHasher24::new(self.key);
        h.write_u64(self.windows);
        self.windows += 1;
        let draw = ((h.finish() as u32 as u64 * limit as u64) >> 32) as u32;
        limit.div_ceil(2).saturating_add(draw)
    }

    pub fn allow(&mut self, now: Instant, limit: u32) -> bool {
        let expired = self.window_start.is_none_or(|s| now >= s + Duration::from_secs(1) || now < s);
        if expired {
            self.window_start = Some(now);
            self.left = self.budget(limit);
        }
        if self.left > 0 {
            self.left -= 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many challenge ACKs each of `seconds` consecutive seconds allows (asking more
    /// often than any budget).
    fn budgets(key: [u64; 2], limit: u32, seconds: u64) -> Vec<u32> {
        let mut l = ChallengeLimiter::new(key);
        (0..seconds)
            .map(|s| {
                let now = Instant::from_secs(100 + s);
                let mut n = 0;
                while l.allow(now, limit) {
                    n += 1;
                    assert!(n <= 2 * limit, "runaway budget");
                }
                // Still refused later in the same second.
                assert!(!l.allow(now + Duration::from_millis(999), limit));
                n
            })
            .collect()
    }

    #[test]
    fn each_second_draws_a_budget_between_half_and_one_and_a_half_limits() {
        let key = super::super::hash::derive_key(7, 6);
        for limit in [1u32, 2, 3, 10, 1000] {
            let b = budgets(key, limit, 200);
            let (lo, hi) = (limit.div_ceil(2), limit.div_ceil(2) + limit - 1);
            assert!(b.iter().all(|&n| (lo..=hi).contains(&n)), "limit {limit}: {b:?}");
            if limit > 1 {
                assert!(b.iter().any(|&n| n != b[0]), "limit {limit}: the budget never changes: {b:?}");
            }
            if limit == 1000 {
                // The draw is uniform: over 200 seconds the mean is near `limit`.
                let mean = b.iter().map(|&n| n as u64).sum::<u64>() / b.len() as u64;
                assert!((900..=1100).contains(&mean), "mean budget {mean}");
            }
        }
        assert_eq!(budgets(key, 1, 5), [1; 5], "limit 1: exactly one per second");
        assert_eq!(budgets(key, 0, 5), [0; 5], "limit 0: none");
    }

    #[test]
    fn budgets_are_reproducible_from_the_key_and_differ_between_keys() {
        let a = budgets(super::super::hash::derive_key(7, 6), 1000, 20);
        assert_eq!(a, budgets(super::super::hash::derive_key(7, 6), 1000, 20));
        assert_ne!(a, budgets(super::super::hash::derive_key(8, 6), 1000, 20));
    }

    #[test]
    fn the_first_second_starts_at_the_first_challenge() {
        let mut l = ChallengeLimiter::new([1, 2]);
        // Even at time zero (a simulation's epoch) the first second has its budget.
        assert!(l.allow(Instant::ZERO, 1));
        assert!(!l.allow(Instant::ZERO + Duration::from_millis(999), 1));
        assert!(l.allow(Instant::ZERO + Duration::from_secs(1), 1));
    }
}
