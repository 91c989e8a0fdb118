//! Initial sequence numbers (RFC 6528) and ephemeral ports (RFC 6056).

use super::hash::SipHasher24;
use super::seq::SeqNumber;
use crate::time::Instant;
use core::hash::Hasher;
use core::net::Ipv4Addr;

/// RFC 6528 §3: `ISN = M + F(localip, localport, remoteip, remoteport, secretkey)`, where M
/// is a clock ticking every 4 µs and F a keyed hash. Connections to different peers get
/// unrelated ISNs, while one 4-tuple's ISNs still advance with time, so old duplicates of a
/// previous incarnation fall outside the new window.
#[derive(Debug, Clone)]
pub struct IsnGenerator {
    key: [u64; 2],
}

impl IsnGenerator {
    /// A generator keyed with the 128-bit secret `key`.
    pub fn new(key: [u64; 2]) -> Self {
        IsnGenerator { key }
    }

    /// The ISN at `now` for the connection from `local` to `remote`.
    pub fn isn(&self, now: Instant, local: (Ipv4Addr, u16), remote: (Ipv4Addr, u16)) -> SeqNumber {
        let mut h = SipHasher24::new(self.key);
        h.write(&local.0.octets());
        h.write(&local.1.to_be_bytes());
        h.write(&remote.0.octets());
        h.write(&remote.1.to_be_bytes());
        let m = (now.total_micros() / 4) as u32;
        SeqNumber(m.wrapping_add(h.finish() as u32))
    }
}

/// RFC 6056 §3.3.3 (Algorithm 3, "Simple Hash-Based"): the search for a free port starts at
/// an offset given by a keyed hash of the local address and the destination, plus a counter
/// that advances on every attempt. Different destinations get unrelated port sequences; one
/// destination never sees a port reused soon.
#[derive(Debug, Clone)]
pub struct PortAllocator {
    key: [u64; 2],
    first: u16,
    last: u16,
    next_ephemeral: u32,
}

impl PortAllocator {
    /// Ports `first..=last`; IANA's ephemeral range is 49152..=65535, Linux uses 32768..=60999.
    pub fn new(key: [u64; 2], first: u16, last: u16) -> Self {
        let (first, last) = if first <= last { (first, last) } else { (last, first) };
        PortAllocator { key, first: first.max(1), last, next_ephemeral: 0 }
    }

    /// Candidates in the order to try; the caller takes the first whose 4-tuple is free.
    /// Yields every port of the range exactly once.
    pub fn candidates(&mut self, local: Ipv4Addr, remote: (Ipv4Addr, u16)) -> impl Iterator<Item = u16> + '_ {
        let mut h = SipHasher24::new(self.key);
        h.write(&local.octets());
        h.write(&remote.0.octets());
        h.write(&remote.1.to_be_bytes());
        let offset = h.finish() as u32;
        let num = (self.last - self.first) as u32 + 1;
        let first = self.first;
        let start = self.next_ephemeral;
        (0..num).map(move |count| {
            // RFC 6056: next_ephemeral advances with each attempt, found or not.
            self.next_ephemeral = self.next_ephemeral.wrapping_add(1);
            first + (offset.wrapping_add(start).wrapping_add(count) % num) as u16
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    #[test]
    fn isn_is_keyed_per_tuple_and_advances_with_the_4us_clock() {
        // RFC 6528 §3.
        let g = IsnGenerator::new([1, 2]);
        let t = Instant::from_secs(10);
        let a = g.isn(t, (A, 1000), (B, 80));
        assert_ne!(a, g.isn(t, (A, 1001), (B, 80)));
        assert_ne!(a, IsnGenerator::new([1, 3]).isn(t, (A, 1000), (B, 80)));
        assert_eq!(g.isn(t + crate::time::Duration::from_micros(400), (A, 1000), (B, 80)).since(a), 100);
    }

    #[test]
    fn ports_cover_the_range_once_and_differ_per_destination() {
        // RFC 6056 §3.3.3.
        let mut p = PortAllocator::new([5, 6], 49152, 49161);
        let ports: Vec<u16> = p.candidates(A, (B, 80)).collect();
        assert_eq!(ports.len(), 10);
        assert_eq!(ports.iter().copied().collect::<HashSet<_>>().len(), 10);
        assert!(ports.iter().all(|p| (49152..=49161).contains(p)));
        // The counter moves on with every attempt: consecutive searches for the same
        // destination start at consecutive offsets, not at the same port.
        let first = p.candidates(A, (B, 80)).next().unwrap();
        let second = p.candidates(A, (B, 80)).next().unwrap();
        assert_ne!(first, second);
        let mut q = PortAllocator::new([5, 6], 1024, 65535);
        let x = q.candidates(A, (B, 80)).next().unwrap();
        let mut q = PortAllocator::new([5, 6], 1024, 65535);
        let y = q.candidates(A, (B, 443)).next().unwrap();
        assert_ne!(x, y);
    }
}
