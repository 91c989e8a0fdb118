//! Keyed hashing: SipHash (Aumasson & Bernstein), for the ISN and ephemeral-port functions
//! (RFC 6528, RFC 6056) and for the connection table, whose key must not be guessable
//! (a peer that could choose colliding 4-tuples could turn lookups into linear scans).
//!
//! The key comes from the stack's configuration, so a simulation with a fixed seed is
//! deterministic, and a real stack seeds it from the OS.

use core::hash::{BuildHasher, Hasher};

/// SipHash with `C` compression and `D` finalization rounds.
#[derive(Debug, Clone, Copy)]
pub struct SipHasher<const C: usize, const D: usize> {
    v: [u64; 4],
    tail: u64,
    ntail: usize,
    length: usize,
}

/// SipHash-2-4: the conservative variant, for ISNs and ports.
pub type SipHasher24 = SipHasher<2, 4>;
/// SipHash-1-3: the faster variant std uses for hash tables.
pub type SipHasher13 = SipHasher<1, 3>;

impl<const C: usize, const D: usize> SipHasher<C, D> {
    /// A hasher keyed with the 128-bit `key`.
    pub fn new(key: [u64; 2]) -> Self {
        let [k0, k1] = key;
        SipHasher {
            v: [k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d, k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573],
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }

    #[inline]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    #[inline]
    fn compress(&mut self, m: u64) {
        self.v[3] ^= m;
        for _ in 0..C {
            Self::round(&mut self.v);
        }
        self.v[0] ^= m;
    }
}

impl<const C: usize, const D: usize> Hasher for SipHasher<C, D> {
    fn write(&mut self, bytes: &[u8]) {
        self.length += bytes.len();
        let mut bytes = bytes;
        if self.ntail > 0 {
            while self.ntail < 8 {
                let Some((&b, rest)) = bytes.split_first() else { return };
                self.tail |= (b as u64) << (8 * self.ntail);
                self.ntail += 1;
                bytes = rest;
            }
            let m = self.tail;
            self.compress(m);
            self.tail = 0;
            self.ntail = 0;
        }
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let m = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.compress(m);
        }
        for &b in chunks.remainder() {
            self.tail |= (b as u64) << (8 * self.ntail);
            self.ntail += 1;
        }
    }

    fn finish(&self) -> u64 {
        let mut s = *self;
        let b = ((s.length as u64 & 0xff) << 56) | s.tail;
        s.compress(b);
        s.v[2] ^= 0xff;
        for _ in 0..D {
            Self::round(&mut s.v);
        }
        s.v[0] ^ s.v[1] ^ s.v[2] ^ s.v[3]
    }
}

/// SipHash-2-4 of the message made of `words`, each as 8 little-endian bytes: the value
/// [`SipHasher24`] gives for the same bytes, without its byte-at-a-time tail handling.
/// For fixed-size keys built from a few fields (a 4-tuple, a counter), as Linux's
/// `siphash_3u32` and its kin serve its SYN cookies and ISNs: a SYN flood hashes every SYN.
#[inline]
pub fn siphash24_words<const N: usize>(key: [u64; 2], words: [u64; N]) -> u64 {
    let mut s = SipHasher24::new(key);
    for m in words {
        s.compress(m);
    }
    s.length = 8 * N;
    s.finish()
}

/// A `BuildHasher` with a fixed key, for deterministic keyed hash tables.
#[derive(Debug, Clone, Copy)]
pub struct KeyedState {
    key: [u64; 2],
}

impl KeyedState {
    /// A builder of SipHash-1-3 hashers keyed with the 128-bit `key`.
    pub fn new(key: [u64; 2]) -> Self {
        KeyedState { key }
    }
}

impl BuildHasher for KeyedState {
    type Hasher = SipHasher13;
    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new(self.key)
    }
}

/// Derive independent keys from one seed (SplitMix64), so a stack seeded with one number
/// gets unrelated keys for each use.
pub fn derive_key(seed: u64, purpose: u64) -> [u64; 2] {
    let mut x = seed ^ purpose.wrapping_mul(0x9e3779b97f4a7c15);
    let mut next = || {
        x = x.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    };
    [next(), next()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash24_reference_vectors() {
        // The reference vectors of the SipHash paper (Appendix A): key 00..0f, messages
        // 00, 00 01, ... of length 0..; first outputs of vectors.h.
        let key = [u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]), u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15])];
        let expected: [u64; 4] = [0x726fdb47dd0e0e31, 0x74f839c593dc67fd, 0x0d6c8009d9a94f5a, 0x85676696d7fb7e2d];
        for (len, want) in expected.iter().enumerate() {
            let msg: Vec<u8> = (0..len as u8).collect();
            let mut h = SipHasher24::new(key);
            h.write(&msg);
            assert_eq!(h.finish(), *want, "length {len}");
        }
        // Length 15 (vectors.h entry 15), written in two pieces to exercise the tail.
        let msg: Vec<u8> = (0..15u8).collect();
        let mut h = SipHasher24::new(key);
        h.write(&msg[..3]);
        h.write(&msg[3..]);
        assert_eq!(h.finish(), 0xa129ca6149be45e5);
    }

    #[test]
    fn word_hash_equals_the_byte_hash_of_the_same_bytes() {
        let key = derive_key(42, 7);
        let mut x = 0x0123_4567_89ab_cdefu64;
        for _ in 0..100 {
            x = x.rotate_left(17).wrapping_mul(0x9e3779b97f4a7c15) ^ 0x5555;
            let (a, b, c) = (x, x.rotate_left(23) ^ 1, x.wrapping_add(99));
            let bytes = |ws: &[u64]| ws.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
            for ws in [&[a][..], &[a, b], &[a, b, c]] {
                let mut h = SipHasher24::new(key);
                h.write(&bytes(ws));
                let want = h.finish();
                let got = match ws.len() {
                    1 => siphash24_words(key, [a]),
                    2 => siphash24_words(key, [a, b]),
                    _ => siphash24_words(key, [a, b, c]),
                };
                assert_eq!(got, want, "{ws:x?}");
            }
        }
    }

    #[test]
    fn derived_keys_differ_by_purpose_and_seed() {
        assert_ne!(derive_key(1, 1), derive_key(1, 2));
        assert_ne!(derive_key(1, 1), derive_key(2, 1));
        assert_eq!(derive_key(7, 3), derive_key(7, 3));
    }
}
