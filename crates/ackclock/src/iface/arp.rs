//! The neighbour cache: IPv4 address to Ethernet address, learned by ARP (RFC 826), with
//! expiry, and a bounded queue of frames waiting for a resolution.

use crate::buf::PBuf;
use crate::time::{Duration, Instant};
use crate::wire::EthernetAddress;
use core::net::Ipv4Addr;
use std::collections::{HashMap, VecDeque};

/// Cache settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpConfig {
    /// Entries held at most; the oldest is evicted beyond it.
    pub capacity: usize,
    /// How long a learned entry is trusted (Linux `base_reachable_time` is 30 s; entries
    /// are confirmed by traffic, so a minute is conservative).
    pub lifetime: Duration,
    /// Frames parked waiting for resolution, all neighbours together.
    pub pending_frames: usize,
    /// Frames parked per neighbour. Linux's `unres_qlen_bytes` (212,992 bytes since 3.3)
    /// holds about 90 full-size frames; 64 lets a first burst (a window of segments, a
    /// train of datagrams) wait for the reply instead of losing all but a few.
    pub pending_per_neighbour: usize,
    /// Time between requests for the same address.
    pub retry: Duration,
    /// How long a frame waits for its next hop to resolve before it is dropped, releasing
    /// its buffer (Linux: `mcast_solicit` 3 requests, `retrans_time` 1 s apart, then the
    /// neighbour fails and its queue is freed).
    pub pending_timeout: Duration,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            capacity: 1024,
            lifetime: Duration::from_secs(60),
            pending_frames: 256,
            pending_per_neighbour: 64,
            retry: Duration::from_secs(1),
            pending_timeout: Duration::from_secs(3),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    mac: EthernetAddress,
    expires: Option<Instant>,
}

/// A resolved next hop that a sender (a connection) keeps: valid while the cache's
/// generation is unchanged and the entry has not expired, so that the sender's frames skip
/// the hash lookup. It also keeps the headers of the sender's last frame
/// ([`Prebuilt`](super::prebuilt::Prebuilt)), valid as long as the hop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedHop {
    pub(super) gen: u32,
    ip: Ipv4Addr,
    mac: EthernetAddress,
    pub(super) expires: Option<Instant>,
    pub(super) pre: super::prebuilt::Prebuilt,
}

impl CachedHop {
    /// A hop on a link without neighbours to resolve (a TUN): valid until the cache changes.
    pub(super) fn point_to_point(gen: u32, ip: Ipv4Addr) -> CachedHop {
        CachedHop { gen, ip, mac: EthernetAddress([0; 6]), expires: None, pre: super::prebuilt::Prebuilt::EMPTY }
    }
}

/// The cache.
#[derive(Debug)]
pub struct ArpCache {
    config: ArpConfig,
    entries: HashMap<Ipv4Addr, Entry>,
    /// Moves on whenever an entry is added, changed or removed: a [`CachedHop`] of another
    /// generation is looked up again.
    gen: u32,
    /// Frames waiting for their next hop, with that hop and when they were parked (oldest
    /// first).
    pending: VecDeque<(Ipv4Addr, Instant, PBuf)>,
    /// When a request for an address was last sent.
    requested: HashMap<Ipv4Addr, Instant>,
    /// Frames dropped because the pending queue was full.
    pub pending_dropped: u64,
    /// Frames dropped because their next hop did not resolve in `pending_timeout`.
    pub pending_expired: u64,
}

impl ArpCache {
    /// An empty cache with these settings.
    pub fn new(config: ArpConfig) -> ArpCache {
        ArpCache {
            config,
            entries: HashMap::with_capacity(config.capacity.min(4096)),
            gen: 0,
            pending: VecDeque::with_capacity(config.pending_frames),
            // Sized like `entries` (it is cleared beyond `capacity`), so that the first request,
            // often a refresh of an entry that expired mid-transfer, does not allocate.
            requested: HashMap::with_capacity(config.capacity.min(4096)),
            pending_dropped: 0,
            pending_expired: 0,
        }
    }

    /// A permanent entry (never expires).
    pub fn insert_static(&mut self, ip: Ipv4Addr, mac: EthernetAddress) {
        self.entries.insert(ip, Entry { mac, expires: None });
        self.gen = self.gen.wrapping_add(1);
    }

    /// Learn or refresh a mapping from received traffic.
    pub fn learn(&mut self, now: Instant, ip: Ipv4Addr, mac: EthernetAddress) {
        if !mac.is_unicast() || ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
            return;
        }
        if let Some(e) = self.entries.get_mut(&ip) {
            if e.expires.is_some() {
                *e = Entry { mac, expires: Some(now + self.config.lifetime) };
                self.gen = self.gen.wrapping_add(1);
            }
            return;
        }
        if self.entries.len() >= self.config.capacity {
            // Evict the entry closest to expiry; static entries stay.
            let victim = self.entries.iter().filter_map(|(ip, e)| e.expires.map(|t| (t, *ip))).min();
            match victim {
                Some((_, ip)) => {
                    self.entries.remove(&ip);
                    self.gen = self.gen.wrapping_add(1);
                }
                None => return,
            }
        }
        self.entries.insert(ip, Entry { mac, expires: Some(now + self.config.lifetime) });
        self.gen = self.gen.wrapping_add(1);
        self.requested.remove(&ip);
    }

    /// The generation: it moves on whenever an entry is added, changed or removed.
    #[inline]
    pub(super) fn gen(&self) -> u32 {
        self.gen
    }

    /// Whether there is an entry for `ip`, fresh or expired (RFC 826's merge test).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.entries.contains_key(&ip)
    }

    /// The Ethernet address for `ip`, if known and fresh.
    #[inline]
    pub fn lookup(&self, now: Instant, ip: Ipv4Addr) -> Option<EthernetAddress> {
        self.fresh(now, ip).map(|e| e.mac)
    }

    /// The entry for `ip` if it has not expired.
    fn fresh(&self, now: Instant, ip: Ipv4Addr) -> Option<&Entry> {
        self.entries.get(&ip).filter(|e| e.expires.is_none_or(|t| t > now))
    }

    /// [`lookup`](Self::lookup) through a sender's cached hop: while the cache has not
    /// changed and the entry is fresh, the answer is the cached one, without hashing `ip`.
    #[inline]
    pub fn lookup_cached(&self, now: Instant, ip: Ipv4Addr, hop: &mut Option<CachedHop>) -> Option<EthernetAddress> {
        if let Some(h) = hop {
            if h.gen == self.gen && h.ip == ip && h.expires.is_none_or(|t| t > now) {
                return Some(h.mac);
            }
        }
        self.lookup_refill(now, ip, hop)
    }

    #[inline(never)]
    fn lookup_refill(&self, now: Instant, ip: Ipv4Addr, hop: &mut Option<CachedHop>) -> Option<EthernetAddress> {
        *hop = self.fresh(now, ip).map(|e| CachedHop {
            gen: self.gen,
            ip,
            mac: e.mac,
            expires: e.expires,
            pre: super::prebuilt::Prebuilt::EMPTY,
        });
        hop.map(|h| h.mac)
    }

    /// Park a frame until `next_hop` resolves. Returns whether a request should be sent now.
    pub fn park(&mut self, now: Instant, next_hop: Ipv4Addr, frame: PBuf) -> bool {
        self.expire_pending(now);
        let queued = self.pending.iter().filter(|(ip, _, _)| *ip == next_hop).count();
        if queued >= self.config.pending_per_neighbour || self.pending.len() >= self.config.pending_frames {
            // Drop the oldest frame for this neighbour (or overall), keep the newest.
            let idx = self.pending.iter().position(|(ip, _, _)| *ip == next_hop).unwrap_or(0);
            self.pending.remove(idx);
            self.pending_dropped += 1;
        }
        self.pending.push_back((next_hop, now, frame));
        self.should_request(now, next_hop)
    }

    /// Drop the frames that have waited `pending_timeout` for their next hop (their buffers
    /// go back to the pool); returns how many.
    #[inline]
    pub fn expire_pending(&mut self, now: Instant) -> usize {
        if self.pending.is_empty() {
            return 0;
        }
        self.expire_pending_slow(now)
    }

    #[inline(never)]
    fn expire_pending_slow(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(&(_, parked, _)) = self.pending.front() {
            if now < parked + self.config.pending_timeout {
                break;
            }
            self.pending.pop_front();
            n += 1;
        }
        self.pending_expired += n as u64;
        n
    }

    /// When the oldest parked frame expires, if any frame is parked.
    pub fn pending_deadline(&self) -> Option<Instant> {
        self.pending.front().map(|&(_, parked, _)| parked + self.config.pending_timeout)
    }

    fn should_request(&mut self, now: Instant, ip: Ipv4Addr) -> bool {
        match self.requested.get(&ip) {
            Some(&t) if now < t + self.config.retry => false,
            _ => {
                if self.requested.len() >= self.config.capacity {
                    self.requested.clear();
                }
                self.requested.insert(ip, now);
                true
            }
        }
    }

    /// Take the frames parked for `ip` (after it resolved).
    pub fn take_pending(&mut self, ip: Ipv4Addr, mut f: impl FnMut(PBuf)) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].0 == ip {
                if let Some((_, _, frame)) = self.pending.remove(i) {
                    f(frame);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Frames waiting for resolution.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Entries held (fresh or not yet purged).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};

    const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    #[test]
    fn learned_entries_expire_static_ones_do_not() {
        let mut c = ArpCache::new(ArpConfig::default());
        let t = Instant::from_secs(1);
        c.learn(t, IP, MAC);
        assert_eq!(c.lookup(t, IP), Some(MAC));
        assert_eq!(c.lookup(t + Duration::from_secs(61), IP), None);
        c.insert_static(Ipv4Addr::new(10, 0, 0, 3), MAC);
        assert_eq!(c.lookup(Instant::from_secs(1_000_000), Ipv4Addr::new(10, 0, 0, 3)), Some(MAC));
        c.learn(t, Ipv4Addr::BROADCAST, MAC);
        c.learn(t, IP, EthernetAddress::BROADCAST);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_cached_hop_answers_as_the_cache_does_through_changes_and_expiry() {
        let mut c = ArpCache::new(ArpConfig::default());
        let t = Instant::from_secs(1);
        let mut hop = None;
        assert_eq!(c.lookup_cached(t, IP, &mut hop), None, "unknown: nothing cached");
        assert_eq!(hop, None);
        c.learn(t, IP, MAC);
        assert_eq!(c.lookup_cached(t, IP, &mut hop), Some(MAC));
        assert!(hop.is_some(), "resolved: cached");
        let other = Ipv4Addr::new(10, 0, 0, 9);
        assert_eq!(c.lookup_cached(t, other, &mut hop), None, "another next hop is looked up, not served");
        assert_eq!(c.lookup_cached(t, IP, &mut hop), Some(MAC));
        // The peer moved to another MAC: the cache changed, the cached hop follows.
        let moved = EthernetAddress([2, 0, 0, 0, 0, 7]);
        c.learn(t + Duration::from_secs(1), IP, moved);
        assert_eq!(c.lookup_cached(t + Duration::from_secs(1), IP, &mut hop), Some(moved));
        // Expiry holds for the cached hop as for the cache.
        let late = t + Duration::from_secs(62);
        assert_eq!(c.lookup(late, IP), None);
        assert_eq!(c.lookup_cached(late, IP, &mut hop), None);
    }

    #[test]
    fn capacity_evicts_the_stalest() {
        let mut c = ArpCache::new(ArpConfig { capacity: 2, ..Default::default() });
        c.learn(Instant::from_secs(1), Ipv4Addr::new(10, 0, 0, 1), MAC);
        c.learn(Instant::from_secs(2), Ipv4Addr::new(10, 0, 0, 2), MAC);
        c.learn(Instant::from_secs(3), Ipv4Addr::new(10, 0, 0, 3), MAC);
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(Instant::from_secs(3), Ipv4Addr::new(10, 0, 0, 1)), None);
    }

    /// A frame whose next hop never answers is dropped after `pending_timeout` (3 s: Linux's
    /// three requests one second apart), oldest first, and its buffer goes back to the pool;
    /// the cache reports when the next one is due.
    #[test]
    fn parked_frames_expire_and_free_their_buffers() {
        let pool = Pool::new(PoolConfig { buffers: 4, ..Default::default() }).unwrap();
        let mut c = ArpCache::new(ArpConfig::default());
        let t = Instant::from_secs(10);
        assert_eq!(c.pending_deadline(), None);
        c.park(t, IP, pool.alloc().unwrap());
        c.park(t + Duration::from_secs(1), Ipv4Addr::new(10, 0, 0, 9), pool.alloc().unwrap());
        assert_eq!(pool.available(), 2);
        assert_eq!(c.pending_deadline(), Some(t + Duration::from_secs(3)));
        assert_eq!(c.expire_pending(t + Duration::from_millis(2999)), 0);
        assert_eq!(c.expire_pending(t + Duration::from_secs(3)), 1);
        assert_eq!((c.pending_len(), c.pending_expired, pool.available()), (1, 1, 3));
        assert_eq!(c.pending_deadline(), Some(t + Duration::from_secs(4)));
        // Parking also purges what is due.
        c.park(t + Duration::from_secs(5), IP, pool.alloc().unwrap());
        assert_eq!((c.pending_len(), c.pending_expired, pool.available()), (1, 2, 3));
        let mut got = 0;
        c.take_pending(IP, |_| got += 1);
        assert_eq!((got, c.pending_deadline()), (1, None));
    }

    #[test]
    fn pending_is_bounded_and_requests_are_paced() {
        let pool = Pool::new(PoolConfig { buffers: 16, ..Default::default() }).unwrap();
        let mut c = ArpCache::new(ArpConfig { pending_per_neighbour: 2, ..Default::default() });
        let t = Instant::from_secs(1);
        let frame = |n: u8| {
            let mut b = pool.alloc().unwrap();
            b.append(1).unwrap()[0] = n;
            b
        };
        assert!(c.park(t, IP, frame(1)), "first frame triggers a request");
        assert!(!c.park(t, IP, frame(2)), "no second request within the retry time");
        assert!(!c.park(t, IP, frame(3)));
        assert_eq!(c.pending_len(), 2);
        assert_eq!(c.pending_dropped, 1);
        assert!(c.park(t + Duration::from_secs(2), IP, frame(4)), "retry after a second");
        let mut got = vec![];
        c.take_pending(IP, |f| got.push(f.data()[0]));
        assert_eq!(got, vec![3, 4], "the oldest were dropped");
        assert_eq!(pool.available(), 16);
    }
}
