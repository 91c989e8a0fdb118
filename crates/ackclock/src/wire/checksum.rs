//! The Internet checksum (RFC 1071), its incremental update (RFC 1624), the IPv4
//! pseudo-header sum, and the fused copy-and-sum that is the stack's single copy
//! (DESIGN.md principle 1).
//!
//! A *sum* here is the folded ones'-complement sum of the data read as big-endian 16-bit
//! words, in `0..=0xffff`, not yet complemented. A trailing odd byte is the high byte of a
//! last word padded with zero. The checksum *field* is `!sum` ([`finish`]).
//! Sums combine with [`add`]; a sum of bytes that started at an odd offset of the whole is
//! byte-swapped before adding ([`add_at`]), RFC 1071 §2(B).

use core::net::Ipv4Addr;

/// Ones'-complement sum of `data` (see the module docs).
pub fn sum(data: &[u8]) -> u16 {
    fold(wide_sum(data))
}

/// Copy `src` into `dst[..src.len()]` and return the sum of the copied bytes, in one pass.
///
/// # Panics
/// If `dst` is shorter than `src` (a caller bug, like `copy_from_slice`).
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    let dst = &mut dst[..src.len()];
    dst.copy_from_slice(src);
    sum(dst)
}

/// Ones'-complement addition of two sums.
#[inline]
pub fn add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// Add `b`, the sum of bytes that start at byte `b_offset` of the whole, to `a`.
#[inline]
pub fn add_at(a: u16, b: u16, b_offset: usize) -> u16 {
    if b_offset & 1 == 1 {
        add(a, b.swap_bytes())
    } else {
        add(a, b)
    }
}

/// The checksum field value for a sum.
#[inline]
pub fn finish(sum: u16) -> u16 {
    !sum
}

/// Sum of the IPv4 pseudo-header used by TCP and UDP (RFC 9293 §3.1, RFC 768).
#[inline]
pub fn pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = src.to_bits();
    let d = dst.to_bits();
    let acc = (s >> 16) as u64
        + (s & 0xffff) as u64
        + (d >> 16) as u64
        + (d & 0xffff) as u64
        + protocol as u64
        + length as u64;
    fold(acc)
}

/// RFC 1624 eqn. 3: the new checksum field after a 16-bit word of the covered data changes
/// from `old` to `new`. `check` is the field value (already complemented).
#[inline]
pub fn update16(check: u16, old: u16, new: u16) -> u16 {
    !add(add(!check, !old), new)
}

/// [`update16`] for a 32-bit field (two adjacent words, e.g. a sequence number).
#[inline]
pub fn update32(check: u16, old: u32, new: u32) -> u16 {
    let c = update16(check, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

/// Fold a wide accumulator of 16-bit words into a 16-bit ones'-complement sum.
#[inline]
fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// Sum of big-endian 16-bit words, not folded.
fn wide_sum(data: &[u8]) -> u64 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        acc += (*last as u64) << 8;
    }
    acc
}
