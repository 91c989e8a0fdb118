//! Property tests of `wire::checksum` against a naive RFC 1071 reference: every length
//! 0..2000, every source and destination alignment 0..8, odd splits, RFC 1624 updates and
//! the pseudo-header.

use ackclock::wire::checksum::{add, add_at, copy_and_sum, finish, pseudo_header, sum, update16, update32};
use ackclock::wire::Ipv4Addr;
use proptest::prelude::*;

/// The naive reference: big-endian 16-bit words, a trailing odd byte as the high byte of a
/// zero-padded word, end-around carry after every addition.
fn naive(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        s += w as u32;
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Deterministic pseudo-random bytes (xorshift64*), so the exhaustive tests need no seed.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// Ones'-complement equality: 0x0000 and 0xffff are both zero.
fn oc_eq(a: u16, b: u16) -> bool {
    a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
}

const SENTINEL: u8 = 0xa5;

/// `copy_and_sum` of `src` into a sentinel-filled buffer at `dst_align`: checks the copy,
/// that nothing outside it was written, and returns the sum.
fn check_copy(src: &[u8], dst_align: usize) -> u16 {
    let mut buf = vec![SENTINEL; dst_align + src.len() + 16];
    // A destination longer than the source: only `src.len()` bytes may be written.
    let s = copy_and_sum(&mut buf[dst_align..], src);
    assert_eq!(&buf[dst_align..dst_align + src.len()], src, "copy");
    assert!(buf[..dst_align].iter().all(|&b| b == SENTINEL), "wrote before dst");
    assert!(buf[dst_align + src.len()..].iter().all(|&b| b == SENTINEL), "wrote past src.len()");
    s
}

#[test]
fn rfc1071_worked_example() {
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(naive(&data), 0xddf2);
    assert_eq!(sum(&data), 0xddf2);
    assert_eq!(finish(sum(&data)), 0x220d);
    let mut dst = [0u8; 8];
    assert_eq!(copy_and_sum(&mut dst, &data), 0xddf2);
    assert_eq!(dst, data);
    // §2(B): byte order independence, the swapped data sums to the swapped sum.
    let swapped = [0x01, 0x00, 0x03, 0xf2, 0xf5, 0xf4, 0xf7, 0xf6];
    assert_eq!(sum(&swapped), 0xf2dd);
    // With the checksum field appended the whole verifies.
    let mut whole = data.to_vec();
    whole.extend_from_slice(&0x220du16.to_be_bytes());
    assert_eq!(sum(&whole), 0xffff);
}

#[test]
fn zero_and_all_ones() {
    for len in [0, 1, 2, 3, 31, 63, 64, 65, 1460, 65536, 65537] {
        assert_eq!(sum(&vec![0u8; len]), 0, "zeros {len}");
        let ones = vec![0xffu8; len];
        assert_eq!(sum(&ones), naive(&ones), "ones {len}");
        assert_eq!(check_copy(&ones, 3), naive(&ones), "ones copy {len}");
    }
}

/// Every length 0..2000, every source alignment 0..8 (the destination alignment varies
/// with the length, so all 64 pairs occur), one random buffer each.
#[test]
fn every_length_and_alignment() {
    for len in 0..2000usize {
        let buf = bytes(len as u64, len + 8);
        for src_align in 0..8 {
            let src = &buf[src_align..src_align + len];
            let want = naive(src);
            assert_eq!(sum(src), want, "sum len {len} align {src_align}");
            let dst_align = (src_align + len) % 8;
            assert_eq!(check_copy(src, dst_align), want, "copy len {len} align {src_align}/{dst_align}");
        }
    }
}

/// Every split point of a 2000-byte buffer, odd ones included.
#[test]
fn every_split_point() {
    let data = bytes(7, 2000);
    let whole = sum(&data);
    for i in 0..=data.len() {
        let (a, b) = data.split_at(i);
        assert_eq!(add_at(sum(a), sum(b), i), whole, "split at {i}");
    }
}

/// Every pair of split points of a 200-byte buffer.
#[test]
fn every_three_way_split() {
    let data = bytes(11, 200);
    let whole = naive(&data);
    for i in 0..=data.len() {
        for j in i..=data.len() {
            let s = add_at(add_at(sum(&data[..i]), sum(&data[i..j]), i), sum(&data[j..]), j);
            assert_eq!(s, whole, "split at {i}, {j}");
        }
    }
}

fn data_and_align() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (0usize..2000, 0usize..8)
        .prop_flat_map(|(len, align)| (proptest::collection::vec(any::<u8>(), len + align), Just(align)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sum_and_copy_match_naive((buf, src_align) in data_and_align(), dst_align in 0usize..8) {
        let src = &buf[src_align..];
        let want = naive(src);
        prop_assert_eq!(sum(src), want);
        prop_assert_eq!(check_copy(src, dst_align), want);
    }

    #[test]
    fn split_combines(data in proptest::collection::vec(any::<u8>(), 0..2000), i in any::<prop::sample::Index>(), j in any::<prop::sample::Index>()) {
        let whole = naive(&data);
        let (i, j) = {
            let (x, y) = (i.index(data.len() + 1), j.index(data.len() + 1));
            (x.min(y), x.max(y))
        };
        prop_assert_eq!(add_at(sum(&data[..i]), sum(&data[i..]), i), whole);
        let three = add_at(add_at(sum(&data[..i]), sum(&data[i..j]), i), sum(&data[j..]), j);
        prop_assert_eq!(three, whole);
        // Sums copied piecewise combine the same way.
        let mut dst = vec![0u8; data.len()];
        let a = copy_and_sum(&mut dst[..i], &data[..i]);
        let b = copy_and_sum(&mut dst[i..], &data[i..]);
        prop_assert_eq!(add_at(a, b, i), whole);
        prop_assert_eq!(dst, data);
    }

    #[test]
    fn add_is_ones_complement_addition(a: u16, b: u16) {
        prop_assert_eq!(add(a, b), naive(&[(a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8]));
    }

    #[test]
    fn update16_matches_recompute(
        mut data in proptest::collection::vec(any::<u8>(), 2..1000),
        at in any::<prop::sample::Index>(),
        new: u16,
    ) {
        let at = at.index(data.len() / 2) * 2;
        let old = u16::from_be_bytes([data[at], data[at + 1]]);
        let check = finish(sum(&data));
        data[at..at + 2].copy_from_slice(&new.to_be_bytes());
        prop_assert!(oc_eq(update16(check, old, new), finish(sum(&data))));
    }

    #[test]
    fn update32_matches_recompute(
        mut data in proptest::collection::vec(any::<u8>(), 4..1000),
        at in any::<prop::sample::Index>(),
        new: u32,
    ) {
        let at = at.index(data.len() / 2 - 1) * 2;
        let old = u32::from_be_bytes(data[at..at + 4].try_into().unwrap());
        let check = finish(sum(&data));
        data[at..at + 4].copy_from_slice(&new.to_be_bytes());
        prop_assert!(oc_eq(update32(check, old, new), finish(sum(&data))));
    }

    /// A packet with its checksum field embedded still verifies after an incremental
    /// update. Bytes 0..2 are a nonzero word (like an IPv4 version/IHL) and bytes 2..4 the
    /// field: RFC 1624 only promises this for data that is not all zero.
    #[test]
    fn updated_packet_verifies(
        rest in proptest::collection::vec(any::<u8>(), 6..1000),
        at in any::<prop::sample::Index>(),
        new16: u16,
        new32: u32,
    ) {
        let mut pkt = vec![0x45, 0x00, 0, 0];
        pkt.extend_from_slice(&rest);
        let check = finish(sum(&pkt));
        pkt[2..4].copy_from_slice(&check.to_be_bytes());
        prop_assert_eq!(sum(&pkt), 0xffff);

        let words = (pkt.len() - 4) / 2;
        let at = 4 + at.index(words - 1) * 2;
        let old16 = u16::from_be_bytes([pkt[at], pkt[at + 1]]);
        let c = update16(u16::from_be_bytes([pkt[2], pkt[3]]), old16, new16);
        pkt[at..at + 2].copy_from_slice(&new16.to_be_bytes());
        pkt[2..4].copy_from_slice(&c.to_be_bytes());
        prop_assert_eq!(sum(&pkt), 0xffff);

        let old32 = u32::from_be_bytes(pkt[at..at + 4].try_into().unwrap());
        let c = update32(u16::from_be_bytes([pkt[2], pkt[3]]), old32, new32);
        pkt[at..at + 4].copy_from_slice(&new32.to_be_bytes());
        pkt[2..4].copy_from_slice(&c.to_be_bytes());
        prop_assert_eq!(sum(&pkt), 0xffff);
    }

    #[test]
    fn pseudo_header_matches_naive(src: u32, dst: u32, protocol: u8, length: u16) {
        let mut ph = Vec::with_capacity(12);
        ph.extend_from_slice(&src.to_be_bytes());
        ph.extend_from_slice(&dst.to_be_bytes());
        ph.extend_from_slice(&[0, protocol]);
        ph.extend_from_slice(&length.to_be_bytes());
        let got = pseudo_header(Ipv4Addr::from_bits(src), Ipv4Addr::from_bits(dst), protocol, length);
        prop_assert_eq!(got, naive(&ph));
    }
}
