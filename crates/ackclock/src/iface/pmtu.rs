//! The path MTU cache: what Datagram Too Big messages (RFC 1191) taught about each
//! destination, kept for every connection and datagram to it, and forgotten after a while.
//!
//! RFC 1191 §5 asks a host to keep the path MTU per destination, so that a second
//! connection to a host behind a small-MTU link does not lose its first full-size segments
//! to learn again what the first one learned, and §6.3 to raise an estimate again after at
//! least 10 minutes, since routes change. Linux keeps both in its route exceptions
//! (`fnhe_pmtu`, expiring after `ip_rt_mtu_expires`, 600 s), lowered only by a smaller MTU
//! (`__ip_rt_update_pmtu`), and every socket to the destination follows at its next send
//! (the socket's `icsk_pmtu_cookie` against the route's MTU). Here a generation number,
//! moved by every change, plays the cookie: a connection compares it before it sends and
//! looks its destination up again only when it moved.
//!
//! The cache is bounded ([`PathMtuConfig::capacity`]): a full cache replaces the entry
//! nearest its expiry, so a flood of messages for new destinations costs old estimates,
//! never memory. Lookups scan the entries; they happen when a connection is set up, after a
//! change, and for UDP datagrams longer than the smallest MTU a message may set, never per
//! TCP segment.

use crate::time::{Duration, Instant};
use core::net::Ipv4Addr;

/// The smallest path MTU a Datagram Too Big may set (Linux `ip_rt_min_pmtu`: 512 + 20 +
/// 20), so that a forged message cannot cut a path into tiny packets (RFC 5927 §7.2).
pub const MIN_PMTU: u16 = 552;

/// No expiry pending.
const NEVER: Instant = Instant::from_nanos(u64::MAX);

/// Settings of the path MTU cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathMtuConfig {
    /// Destinations held at most; a full cache replaces the entry nearest its expiry
    /// (0: nothing is kept, every connection learns on its own).
    pub capacity: usize,
    /// How long a learned MTU holds before the link's MTU is tried again (RFC 1191 §6.3:
    /// at least 5 minutes, 10 recommended; Linux `ip_rt_mtu_expires`, 600 s).
    pub lifetime: Duration,
}

impl Default for PathMtuConfig {
    fn default() -> Self {
        PathMtuConfig { capacity: 256, lifetime: Duration::from_secs(600) }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    dst: Ipv4Addr,
    mtu: u16,
    expires: Instant,
}

/// Learned path MTUs by destination (see the module documentation).
#[derive(Debug)]
pub struct PathMtuCache {
    config: PathMtuConfig,
    entries: Vec<Entry>,
    /// The earliest expiry among the entries ([`NEVER`] when empty).
    next_expiry: Instant,
    generation: u32,
    learned: u64,
    expired: u64,
    evicted: u64,
}

impl PathMtuCache {
    pub(crate) fn new(config: PathMtuConfig) -> PathMtuCache {
        PathMtuCache {
            config,
            entries: Vec::new(),
            next_expiry: NEVER,
            generation: 0,
            learned: 0,
            expired: 0,
            evicted: 0,
        }
    }

    /// The MTU learned for `dst`, if one is held.
    pub fn get(&self, dst: Ipv4Addr) -> Option<u16> {
        if self.entries.is_empty() {
            return None;
        }
        self.entries.iter().find(|e| e.dst == dst).map(|e| e.mtu)
    }

    /// Destinations held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Moves whenever an estimate is learned, lowered or expires: a connection that saw
    /// another value looks its destination up again before it sends.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Estimates learned or lowered, expired (raised again to the link's MTU), and replaced
    /// by a new destination in a full cache.
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.learned, self.expired, self.evicted)
    }

    /// A believed Datagram Too Big reported `mtu` for `dst`: a new or lower estimate, which
    /// holds for the lifetime from now; the same one again restarts its lifetime once half
    /// of it has passed (as Linux); a higher one changes nothing (only expiry raises).
    /// Returns whether the estimate changed.
    pub(crate) fn learn(&mut self, now: Instant, dst: Ipv4Addr, mtu: u16) -> bool {
        let expires = now + self.config.lifetime;
        if let Some(e) = self.entries.iter_mut().find(|e| e.dst == dst) {
            if mtu > e.mtu {
                return false;
            }
            let lower = mtu < e.mtu;
            if lower || e.expires.saturating_duration_since(now) < self.config.lifetime / 2 {
                e.mtu = mtu;
                e.expires = expires;
                // Entries' expiries only move later here: the earliest stays a lower bound.
            }
            if lower {
                self.learned += 1;
                self.generation = self.generation.wrapping_add(1);
            }
            return lower;
        }
        if self.config.capacity == 0 {
            return false;
        }
        let entry = Entry { dst, mtu, expires };
        if self.entries.len() < self.config.capacity {
            self.entries.push(entry);
        } else {
            // Replace the entry nearest its expiry.
            let Some(victim) = self.entries.iter_mut().min_by_key(|e| e.expires) else { return false };
            *victim = entry;
            self.evicted += 1;
        }
        self.next_expiry = self.next_expiry.min(expires);
        self.learned += 1;
        self.generation = self.generation.wrapping_add(1);
        true
    }

    /// Forget the estimates whose lifetime ended by `now` (RFC 1191 §6.3): their
    /// destinations get the link's MTU again. Returns whether any did. One comparison when
    /// none is due.
    #[inline]
    pub(crate) fn expire(&mut self, now: Instant) -> bool {
        if now < self.next_expiry {
            return false;
        }
        self.expire_slow(now)
    }

    #[cold]
    fn expire_slow(&mut self, now: Instant) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.expires > now);
        let gone = before - self.entries.len();
        self.next_expiry = self.entries.iter().map(|e| e.expires).min().unwrap_or(NEVER);
        if gone == 0 {
            return false;
        }
        self.expired += gone as u64;
        self.generation = self.generation.wrapping_add(1);
        true
    }

    /// When the next estimate expires, if any is held.
    pub fn next_expiry(&self) -> Option<Instant> {
        (self.next_expiry != NEVER).then_some(self.next_expiry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn at(s: u64) -> Instant {
        Instant::from_secs(s)
    }

    #[test]
    fn only_a_lower_mtu_changes_an_estimate() {
        let mut c = PathMtuCache::new(PathMtuConfig::default());
        assert!(c.learn(at(1), A, 1400));
        let g = c.generation();
        assert!(!c.learn(at(2), A, 1450), "higher: only expiry raises");
        assert!(!c.learn(at(2), A, 1400), "the same");
        assert_eq!((c.get(A), c.generation()), (Some(1400), g));
        assert!(c.learn(at(3), A, 1300));
        assert_ne!(c.generation(), g);
        assert_eq!((c.get(A), c.get(B)), (Some(1300), None));
        assert_eq!(c.counts(), (2, 0, 0));
    }

    /// RFC 1191 §6.3: the estimate goes after its lifetime (10 minutes), measured from the
    /// last lowering, or from the last confirmation once half of it had passed.
    #[test]
    fn an_estimate_expires_after_its_lifetime() {
        let mut c = PathMtuCache::new(PathMtuConfig::default());
        c.learn(at(0), A, 1400);
        c.learn(at(100), A, 1400); // under half the lifetime: no refresh
        assert!(!c.expire(at(599)));
        assert_eq!(c.next_expiry(), Some(at(600)));
        let g = c.generation();
        assert!(c.expire(at(600)));
        assert_eq!((c.get(A), c.len(), c.next_expiry()), (None, 0, None));
        assert_ne!(c.generation(), g);
        c.learn(at(1000), A, 1400);
        c.learn(at(1400), A, 1400); // past half: the lifetime starts again
        assert!(!c.expire(at(1600)));
        assert_eq!(c.get(A), Some(1400));
        assert!(c.expire(at(2000)));
        assert_eq!(c.counts(), (2, 2, 0));
    }

    /// A full cache replaces the entry nearest its expiry; memory stays bounded.
    #[test]
    fn a_full_cache_replaces_the_oldest_estimate() {
        let mut c = PathMtuCache::new(PathMtuConfig { capacity: 2, ..PathMtuConfig::default() });
        c.learn(at(1), A, 1400);
        c.learn(at(2), B, 1300);
        let third = Ipv4Addr::new(10, 0, 0, 3);
        assert!(c.learn(at(3), third, 1200));
        assert_eq!((c.get(A), c.get(B), c.get(third), c.len()), (None, Some(1300), Some(1200), 2));
        assert_eq!(c.counts().2, 1);
        // Nothing held, nothing learned.
        let mut none = PathMtuCache::new(PathMtuConfig { capacity: 0, ..PathMtuConfig::default() });
        assert!(!none.learn(at(1), A, 1400));
        assert_eq!((none.get(A), none.generation()), (None, 0));
    }
}
