//! The rate limit on ICMP errors, as Linux applies it (`icmp_global_allow` and
//! `inet_peer_xrlim_allow`): a stack-wide token bucket (1000 a second, burst 50) and a
//! per-destination one (one a second, burst 6). RFC 1812 §4.3.2.8 asks for such a limit;
//! without it a flood of datagrams to closed ports becomes a flood of replies.
//!
//! The per-destination buckets live in a fixed table indexed by a hash of the address, so
//! memory stays bounded whatever the number of sources; two destinations that share an
//! entry share its budget (never more replies than the limit, only sometimes fewer).

use crate::time::Instant;
use core::net::Ipv4Addr;

/// Per-destination buckets kept.
const PEERS: usize = 256;
/// Burst of the per-destination bucket, in intervals (Linux `XRLIM_BURST_FACTOR`).
const BURST_FACTOR: u64 = 6;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    addr: Ipv4Addr,
    /// Credit in nanoseconds: one message costs one interval.
    credit: u64,
    last: Instant,
}

/// The two token buckets of ICMP error messages.
#[derive(Debug, Clone)]
pub struct IcmpLimiter {
    /// Stack-wide credit, in messages scaled by 10^9 (one message = 10^9).
    global: u64,
    global_last: Option<Instant>,
    per_sec: u64,
    burst: u64,
    interval_ns: u64,
    peers: Box<[Option<Bucket>]>,
}

impl IcmpLimiter {
    /// `per_sec` messages a second with a burst of `burst` stack-wide, and one per
    /// `interval_ms` with a burst of six per destination (0: no per-destination limit).
    pub fn new(per_sec: u32, burst: u32, interval_ms: u32) -> IcmpLimiter {
        IcmpLimiter {
            global: burst as u64 * 1_000_000_000,
            global_last: None,
            per_sec: per_sec as u64,
            burst: burst as u64,
            interval_ns: interval_ms as u64 * 1_000_000,
            peers: vec![None; PEERS].into_boxed_slice(),
        }
    }

    /// Whether an error may go to `dst` now; if so, it is charged to both buckets.
    pub fn allow(&mut self, now: Instant, dst: Ipv4Addr) -> bool {
        // Stack-wide: credit grows by per_sec messages a second, up to the burst.
        let elapsed = self.global_last.map_or(0, |t| now.saturating_duration_since(t).as_nanos() as u64);
        self.global_last = Some(now);
        let cap = self.burst * 1_000_000_000;
        self.global = self.global.saturating_add(elapsed.saturating_mul(self.per_sec)).min(cap);
        if self.global < 1_000_000_000 {
            return false;
        }
        if self.interval_ns > 0 {
            let i = (u32::from(dst).wrapping_mul(0x9e37_79b1) >> 24) as usize % PEERS;
            let cap = BURST_FACTOR * self.interval_ns;
            let b = match &mut self.peers[i] {
                Some(b) if b.addr == dst => b,
                // A new destination (or one that took the entry over) starts with a full
                // burst, as a fresh inet_peer does.
                entry => entry.insert(Bucket { addr: dst, credit: cap, last: now }),
            };
            b.credit = b.credit.saturating_add(now.saturating_duration_since(b.last).as_nanos() as u64).min(cap);
            b.last = now;
            if b.credit < self.interval_ns {
                return false;
            }
            b.credit -= self.interval_ns;
        }
        self.global -= 1_000_000_000;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    #[test]
    fn one_destination_gets_a_burst_of_six_then_one_a_second() {
        let mut l = IcmpLimiter::new(1000, 50, 1000);
        let t = Instant::from_secs(10);
        assert_eq!((0..20).filter(|_| l.allow(t, A)).count(), 6);
        assert!(!l.allow(t + Duration::from_millis(999), A));
        assert!(l.allow(t + Duration::from_millis(1000), A));
        assert!(!l.allow(t + Duration::from_millis(1500), A));
    }

    #[test]
    fn many_destinations_share_the_global_burst_and_rate() {
        let mut l = IcmpLimiter::new(1000, 50, 1000);
        let t = Instant::from_secs(10);
        let addr = |i: u32| Ipv4Addr::from(0x0a00_0000 + i);
        // Distinct destinations each have budget; the stack-wide burst stops them at 50.
        let sent = (0..200).filter(|&i| l.allow(t, addr(i * 7919))).count();
        assert_eq!(sent, 50);
        // 10 ms later, 10 more (1000 a second).
        let t = t + Duration::from_millis(10);
        let sent = (1000..1200).filter(|&i| l.allow(t, addr(i * 7919))).count();
        assert_eq!(sent, 10);
    }

    #[test]
    fn no_per_destination_limit_when_the_interval_is_zero() {
        let mut l = IcmpLimiter::new(1000, 50, 0);
        let t = Instant::from_secs(1);
        assert_eq!((0..100).filter(|_| l.allow(t, A)).count(), 50);
    }
}
