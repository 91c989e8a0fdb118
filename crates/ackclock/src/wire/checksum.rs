//! The Internet checksum (RFC 1071), its incremental update (RFC 1624), the IPv4
//! pseudo-header sum, and the fused copy-and-sum that is the stack's single copy
//! (Afterburner's single copy, Dalton et al. 1993).
//!
//! A *sum* here is the folded ones'-complement sum of the data read as big-endian 16-bit
//! words, in `0..=0xffff`, not yet complemented. A trailing odd byte is the high byte of a
//! last word padded with zero. The checksum *field* is `!sum` ([`finish`]).
//! Sums combine with [`add`]; a sum of bytes that started at an odd offset of the whole is
//! byte-swapped before adding ([`add_at`]), RFC 1071 §2(B).

use core::net::Ipv4Addr;

/// Ones'-complement sum of `data` (see the module docs).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    to_be_sum(native_sum(data))
}

/// Copy `src` into `dst[..src.len()]` and return the sum of the copied bytes, in one pass.
///
/// # Panics
/// If `dst` is shorter than `src` (a caller bug, like `copy_from_slice`).
#[inline]
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    let dst = &mut dst[..src.len()];
    to_be_sum(native_copy_sum(dst, src))
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

/// Complete a checksum left to the device (`CSUM_PARTIAL`, virtio-net's `NEEDS_CSUM`) as a
/// device does: the sum of `packet` from `start` to its end (the field, at `start +
/// offset`, holds the pseudo-header sum) stored in the field. `false` (nothing written) if
/// the field is not inside `packet`.
pub fn complete_partial(packet: &mut [u8], start: usize, offset: usize) -> bool {
    let at = start.saturating_add(offset);
    if at.saturating_add(2) > packet.len() {
        return false;
    }
    let s = finish(sum(&packet[start..]));
    packet[at..at + 2].copy_from_slice(&s.to_be_bytes());
    true
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

// ---------------------------------------------------------------------------------------
// The summing engine.
//
// Every loop reads the data as *native-endian* words and adds them into wide
// accumulators, leaving the carries in the high bits until the end. RFC 1071 §2(B): the
// ones'-complement sum is byte-order independent, so the folded native-order sum is the
// big-endian-word sum, byte-swapped on little-endian targets ([`to_be_sum`]).
//
// x86_64 (all of `sum` and `copy_and_sum` from 64 bytes up) uses one explicit SIMD kernel
// ([`x86::kernel`]), written once over a small vector trait and instantiated for SSE2 (the
// baseline) and AVX2 (chosen at run time). Each vector is loaded once, stored to `dst`
// when copying, and added into the accumulators: that is the single pass. Why not plain
// auto-vectorised Rust (which the portable fallback below is):
// - LLVM's loop-idiom pass recognises the copy in a fused safe loop, hoists it out as a
//   `memcpy` of the whole buffer and leaves a second loop that sums `src` again (two
//   passes); it does so even for the intrinsics loop unless the stored value is hidden
//   from it ([`x86::kernel`]);
// - the natural auto-vectorised sum (`u32` words zero-extended into `u64` lanes with
//   `vpmovzxdq`), and a split of 64-bit lanes with shifts, both ran at about one vector
//   per cycle on the Zen 3 used for BENCHMARKS.md, 25-30% slower than the kernel.
// The kernel's arithmetic is three cheap ops per vector and no shift: `pmaddwd` of the data
// XORed with 0x8000 in every 16-bit lane, by ones, gives per 32-bit lane
// `(w0 - 0x8000) + (w1 - 0x8000)` for its two native words, added into `i32` lanes; the
// bias is added back once at the end. The tail is one overlapping vector, masked.
//
// Other targets: the safe loops [`sum_body`] (auto-vectorised) and [`copy_sum_body`] (in
// L1-sized blocks, so that if LLVM does split it, the second read of each block hits L1).

/// Inputs shorter than this take the scalar path (headers): no dispatch, no vector set-up.
const SMALL: usize = 64;

/// The portable loops work in blocks of this many bytes, each folded, so that their `u64`
/// accumulators cannot overflow: a block holds fewer than `2^28` words below `2^32`.
/// `BLOCK` is even, so every block starts at an even offset of the whole and block sums
/// add without byte swaps. (The x86 kernel cannot overflow: see [`x86::kernel`].)
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
const BLOCK: usize = 1 << 30;

/// The big-endian-word sum of data whose native-order wide sum is `acc`.
#[inline]
fn to_be_sum(acc: u64) -> u16 {
    let s = fold(acc);
    if cfg!(target_endian = "little") {
        s.swap_bytes()
    } else {
        s
    }
}

/// Fold a wide accumulator of 16-bit (or 32-bit) words into a 16-bit ones'-complement sum.
/// Zero only for a zero accumulator (all-zero data), as with a naive sum. The fast path
/// uses it on big-endian header words it has already loaded (the `ocadd` chain of Jacobson 1993).
#[inline]
pub fn fold(acc: u64) -> u16 {
    // End-around-carry additions of the halves; `s + c` cannot overflow (a carry leaves
    // `s` at most `MAX - 1`), and the result is zero only if both halves are.
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let acc = s + c as u32;
    let (s, c) = (acc as u16).overflowing_add((acc >> 16) as u16);
    s + c as u16
}

/// Wide native-order sum of `data`, not folded.
#[inline]
fn native_sum(data: &[u8]) -> u64 {
    if data.len() < SMALL {
        return tail_sum(data);
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the running CPU has AVX2 (checked just above).
            return unsafe { x86::sum_avx2(data) };
        }
        x86::sum_sse2(data)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    data.chunks(BLOCK).map(|b| fold(sum_body(b)) as u64).sum()
}

/// Wide native-order sum of `src`, copied into `dst` (of the same length), not folded.
#[inline]
fn native_copy_sum(dst: &mut [u8], src: &[u8]) -> u64 {
    if src.len() < SMALL {
        return tail_copy_sum(dst, src);
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the running CPU has AVX2 (checked just above).
            return unsafe { x86::copy_sum_avx2(dst, src) };
        }
        x86::copy_sum_sse2(dst, src)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    dst.chunks_mut(BLOCK).zip(src.chunks(BLOCK)).map(|(d, s)| fold(copy_sum_blocked(d, s)) as u64).sum()
}

/// Portable sum: a plain reduction over native `u32` words zero-extended into one `u64`,
/// the shape LLVM's loop vectoriser turns into several interleaved vector accumulators.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn sum_body(data: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u32::from_ne_bytes(w.try_into().unwrap()) as u64;
    }
    acc + tail_sum(words.remainder())
}

/// Portable fused loop: each word is loaded once, stored to `dst` and added to the
/// accumulator. `dst.len() == src.len()`.
#[inline(always)]
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn copy_sum_body(dst: &mut [u8], src: &[u8]) -> u64 {
    let n = src.len() & !3;
    let (dst, dst_tail) = dst.split_at_mut(n);
    let (src, src_tail) = src.split_at(n);
    let mut acc = 0u64;
    // By-value `zip` of two `chunks_exact` has a trip count LLVM can see.
    for (dw, sw) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
        let w: [u8; 4] = sw.try_into().unwrap();
        dw.copy_from_slice(&w);
        acc += u32::from_ne_bytes(w) as u64;
    }
    acc + tail_copy_sum(dst_tail, src_tail)
}

/// [`copy_sum_body`] over 2 KiB blocks (even-sized, so no byte swaps between blocks).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn copy_sum_blocked(dst: &mut [u8], src: &[u8]) -> u64 {
    dst.chunks_mut(2048).zip(src.chunks(2048)).map(|(d, s)| copy_sum_body(d, s)).sum()
}

/// Native-order wide sum of a slice shorter than [`SMALL`] (a header, or the last bytes of
/// the portable loops): each power-of-two piece of the length at most once, no loop.
#[inline(always)]
fn tail_sum(t: &[u8]) -> u64 {
    debug_assert!(t.len() < SMALL);
    let mut acc = 0u64;
    let mut t = t;
    if let Some((w, rest)) = split::<32>(t) {
        acc += add_u64s(&w);
        t = rest;
    }
    if let Some((w, rest)) = split::<16>(t) {
        acc += add_u64s(&w);
        t = rest;
    }
    if let Some((w, rest)) = split::<8>(t) {
        acc += add_u64s(&w);
        t = rest;
    }
    if let Some((w, rest)) = split::<4>(t) {
        acc += u32::from_ne_bytes(w) as u64;
        t = rest;
    }
    if let Some((w, rest)) = split::<2>(t) {
        acc += u16::from_ne_bytes(w) as u64;
        t = rest;
    }
    if let [b] = t {
        // The high byte of a big-endian word padded with zero.
        acc += u16::from_ne_bytes([*b, 0]) as u64;
    }
    acc
}

/// [`tail_sum`] that also copies `src` into `dst` (of the same length), piece by piece.
/// Straight-line code on purpose: in a loop, LLVM's loop-idiom pass turns the copy into a
/// `memcpy` call followed by a second, summing pass.
#[inline(always)]
fn tail_copy_sum(dst: &mut [u8], src: &[u8]) -> u64 {
    debug_assert!(src.len() < SMALL);
    let (mut dst, mut src) = (dst, src);
    let mut acc = 0u64;
    if let Some(w) = copy_piece::<32>(&mut dst, &mut src) {
        acc += add_u64s(&w);
    }
    if let Some(w) = copy_piece::<16>(&mut dst, &mut src) {
        acc += add_u64s(&w);
    }
    if let Some(w) = copy_piece::<8>(&mut dst, &mut src) {
        acc += add_u64s(&w);
    }
    if let Some(w) = copy_piece::<4>(&mut dst, &mut src) {
        acc += u32::from_ne_bytes(w) as u64;
    }
    if let Some(w) = copy_piece::<2>(&mut dst, &mut src) {
        acc += u16::from_ne_bytes(w) as u64;
    }
    if let (Some(d), [b]) = (dst.first_mut(), src) {
        *d = *b;
        acc += u16::from_ne_bytes([*b, 0]) as u64;
    }
    acc
}

/// Sum of the native `u32` words of `N` bytes (`N` a multiple of 8), read as `u64`s.
#[inline(always)]
fn add_u64s<const N: usize>(w: &[u8; N]) -> u64 {
    w.chunks_exact(8)
        .map(|w| {
            let w = u64::from_ne_bytes(w.try_into().unwrap());
            (w & 0xffff_ffff) + (w >> 32)
        })
        .sum()
}

/// The first `N` bytes of `t` as an array, and the rest.
#[inline(always)]
fn split<const N: usize>(t: &[u8]) -> Option<([u8; N], &[u8])> {
    if t.len() < N {
        return None;
    }
    let (w, rest) = t.split_at(N);
    Some((w.try_into().unwrap(), rest))
}

/// Copy the first `N` bytes of `src` to `dst`, advance both, and return the bytes.
#[inline(always)]
fn copy_piece<const N: usize>(dst: &mut &mut [u8], src: &mut &[u8]) -> Option<[u8; N]> {
    let (w, rest) = split::<N>(src)?;
    let (d, d_rest) = core::mem::take(dst).split_at_mut(N);
    d.copy_from_slice(&w);
    *dst = d_rest;
    *src = rest;
    Some(w)
}

/// The x86_64 SIMD kernel (see the engine notes above). x86_64 is little-endian.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod x86 {
    use core::arch::x86_64::*;

    /// A vector register, and the operations the kernel needs.
    ///
    /// # Safety
    /// The methods are `unsafe` because they execute the implementing type's instruction
    /// set: callers must run on a CPU that has it. `load` / `store` also require `p` to be
    /// valid for `BYTES` bytes of reads / writes (no alignment needed).
    trait Vector: Copy {
        const BYTES: usize;
        unsafe fn zero() -> Self;
        unsafe fn load(p: *const u8) -> Self;
        unsafe fn store(self, p: *mut u8);
        /// `self`, hidden from the optimiser (no instructions): see [`kernel`].
        unsafe fn opaque(self) -> Self;
        /// Bitwise `self & o`.
        unsafe fn and(self, o: Self) -> Self;
        /// `self` as `i32` lanes plus, for each `i32` lane of `x` holding the native-order
        /// words `w0`, `w1`: `(w0 - 0x8000) + (w1 - 0x8000)`, in `-0x10000..=0xfffe`.
        /// (`pmaddwd` of `x ^ 0x8000..` with ones: three cheap ops and no shift.)
        unsafe fn add_words(self, x: Self) -> Self;
        /// `self + o` as `i32` lanes.
        unsafe fn add(self, o: Self) -> Self;
        /// The sum of the `i32` lanes, which must not overflow.
        unsafe fn hsum(self) -> i32;
    }

    #[derive(Clone, Copy)]
    struct Sse2(__m128i);

    #[derive(Clone, Copy)]
    struct Avx2(__m256i);

    // From Rust 1.87 the SSE2 arithmetic intrinsics are safe to call (SSE2 is statically
    // enabled), and the `unsafe` blocks around them unneeded; the MSRV (1.85) needs them.
    #[allow(unused_unsafe)]
    impl Vector for Sse2 {
        const BYTES: usize = 16;
        #[inline(always)]
        unsafe fn zero() -> Self {
            Sse2(unsafe { _mm_setzero_si128() })
        }
        #[inline(always)]
        unsafe fn load(p: *const u8) -> Self {
            // SAFETY: `p` is valid for 16 bytes of reads (the caller's contract).
            Sse2(unsafe { _mm_loadu_si128(p.cast()) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut u8) {
            // SAFETY: `p` is valid for 16 bytes of writes (the caller's contract).
            unsafe { _mm_storeu_si128(p.cast(), self.0) }
        }
        #[inline(always)]
        #[cfg_attr(miri, allow(unused_mut))]
        unsafe fn opaque(mut self) -> Self {
            // SAFETY: the template is a comment: no instructions; it only claims to update
            // the one register it is given, touching no memory, stack or flags. (Not under
            // Miri, which runs no `asm!`: the value is `self` either way.)
            #[cfg(not(miri))]
            unsafe {
                core::arch::asm!("/* {0} */", inout(xmm_reg) self.0, options(pure, nomem, nostack, preserves_flags));
            }
            self
        }
        #[inline(always)]
        unsafe fn and(self, o: Self) -> Self {
            Sse2(unsafe { _mm_and_si128(self.0, o.0) })
        }
        #[inline(always)]
        unsafe fn add_words(self, x: Self) -> Self {
            unsafe {
                let biased = _mm_xor_si128(x.0, _mm_set1_epi16(i16::MIN));
                let pairs = _mm_madd_epi16(biased, _mm_set1_epi16(1));
                Sse2(_mm_add_epi32(self.0, pairs))
            }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            Sse2(unsafe { _mm_add_epi32(self.0, o.0) })
        }
        #[inline(always)]
        unsafe fn hsum(self) -> i32 {
            unsafe {
                let x = self.0;
                let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01_00_11_10>(x));
                let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x));
                _mm_cvtsi128_si32(x)
            }
        }
    }

    // SAFETY (all methods): the caller guarantees AVX2 (the trait's contract), and for
    // `load` / `store` the pointer's validity for 32 bytes.
    impl Vector for Avx2 {
        const BYTES: usize = 32;
        #[inline(always)]
        unsafe fn zero() -> Self {
            Avx2(unsafe { _mm256_setzero_si256() })
        }
        #[inline(always)]
        unsafe fn load(p: *const u8) -> Self {
            Avx2(unsafe { _mm256_loadu_si256(p.cast()) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut u8) {
            unsafe { _mm256_storeu_si256(p.cast(), self.0) }
        }
        // `ymm_reg` needs AVX enabled in the function that holds the `asm!`.
        #[inline]
        #[target_feature(enable = "avx2")]
        #[cfg_attr(miri, allow(unused_mut))]
        unsafe fn opaque(mut self) -> Self {
            // SAFETY: as for `Sse2::opaque`.
            #[cfg(not(miri))]
            unsafe {
                core::arch::asm!("/* {0} */", inout(ymm_reg) self.0, options(pure, nomem, nostack, preserves_flags));
            }
            self
        }
        #[inline(always)]
        unsafe fn and(self, o: Self) -> Self {
            Avx2(unsafe { _mm256_and_si256(self.0, o.0) })
        }
        #[inline(always)]
        unsafe fn add_words(self, x: Self) -> Self {
            unsafe {
                let biased = _mm256_xor_si256(x.0, _mm256_set1_epi16(i16::MIN));
                let pairs = _mm256_madd_epi16(biased, _mm256_set1_epi16(1));
                Avx2(_mm256_add_epi32(self.0, pairs))
            }
        }
        #[inline(always)]
        unsafe fn add(self, o: Self) -> Self {
            Avx2(unsafe { _mm256_add_epi32(self.0, o.0) })
        }
        #[inline(always)]
        unsafe fn hsum(self) -> i32 {
            unsafe {
                let x = self.0;
                let x = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256::<1>(x));
                let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01_00_11_10>(x));
                let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x));
                _mm_cvtsi128_si32(x)
            }
        }
    }

    /// Vectors per main-loop iteration, each with its own accumulator.
    const UNROLL: usize = 4;

    /// Bytes of main loop per set of `i32` accumulators (a multiple of every step). A set
    /// then takes at most `SUB / V::BYTES + 4` vectors (3 leftover whole vectors and the
    /// tail vector), each adding `V::BYTES / 4` lane values of magnitude `<= 2^16`: in all
    /// at most `(2^14 + 32) * 2^16 < 2^31`, so neither a lane nor [`total_of`]
    /// overflows.
    const SUB: usize = 1 << 16;

    /// Wide native-order sum of `src`, also copied into `dst` if given.
    ///
    /// `src.len() >= SMALL`. No overflow for any slice: each set of `i32` accumulators is
    /// bounded by [`SUB`], and the `i64` total (then `u64` sum) of words below `2^16`
    /// would need a slice of more than `2^47` bytes, beyond x86_64's address space.
    ///
    /// The loaded vectors that are stored are first made [`Vector::opaque`]: otherwise
    /// LLVM's loop-idiom pass sees "store of a load at the same stride" and hoists the
    /// stores out of the loop as one `memcpy` (it does, even for explicit intrinsics),
    /// making the copy a second pass.
    ///
    /// # Safety
    /// The CPU must support `V`'s instruction set.
    ///
    /// # Panics
    /// If `dst` is given and its length differs from `src`'s.
    #[inline(always)]
    unsafe fn kernel<V: Vector>(dst: Option<&mut [u8]>, src: &[u8]) -> u64 {
        let len = src.len();
        assert!(len >= super::SMALL);
        let step = V::BYTES * UNROLL;
        let main = len - len % step;
        let vectors = len - len % V::BYTES;
        let (s, d) = (src.as_ptr(), dst.inspect(|d| assert_eq!(d.len(), len)).map(<[u8]>::as_mut_ptr));
        // SAFETY: the CPU supports `V` (this function's contract). Every `load` from `s`
        // and `store` to `d` covers `V::BYTES` bytes ending at most at `len`, and the odd
        // byte is at `len - 1`: within `src` and `dst` (which has length `len`; its
        // pointer comes from the `&mut`, which is not used again). `src` and `dst` cannot
        // overlap (a `&` and a `&mut`). The mask load is in bounds (below).
        let (total, words, odd) = unsafe {
            let mut total = 0i64;
            let mut words = vectors / 2;
            let mut odd = 0;
            let mut o = 0;
            // Whole sets of `SUB` bytes first (inputs longer than 64 KiB only),
            while main - o > SUB {
                let end = o + SUB;
                total += total_of(main_loop::<V>(s, d, &mut o, end)) as i64;
            }
            // then the rest of the main loop, whose accumulators also take the rest.
            let mut acc = main_loop::<V>(s, d, &mut o, main);
            // A trailing odd byte is added on its own (so that what remains is whole
            // words); the last `rest < V::BYTES` bytes before it come from one vector
            // ending with them (starting at an even offset, as `end` is even), loaded
            // before the stores below (the stores just before it would otherwise alias it
            // modulo 4 KiB when `dst - src` is a multiple of 4 KiB, a slow false
            // dependency), copied whole (rewriting bytes already copied, with the same
            // values: `src` and `dst` do not overlap), and summed with the bytes before
            // `vectors` masked to zero.
            let end = len - len % 2;
            let rest = end - vectors;
            // `end - V::BYTES >= 0`: `len >= SMALL > V::BYTES`.
            let last = V::load(s.add(end - V::BYTES));
            // Bytes `i >= V::BYTES - rest` are 0xff (in bounds: `rest < V::BYTES <= 32`).
            let mask = V::load(TAIL_MASKS.as_ptr().add(32 - V::BYTES + rest));
            let odd_byte = *s.add(len - 1);
            // The whole vectors between the main loop and `vectors`,
            while o < vectors {
                let mut x = V::load(s.add(o));
                if let Some(d) = d {
                    x = x.opaque();
                    x.store(d.add(o));
                }
                acc[0] = acc[0].add_words(x);
                o += V::BYTES;
            }
            // the odd byte,
            if len % 2 == 1 {
                if let Some(d) = d {
                    *d.add(len - 1) = odd_byte;
                }
                // The high byte of a big-endian word padded with zero.
                odd = u16::from_ne_bytes([odd_byte, 0]) as u64;
            }
            // and the last vector.
            if rest > 0 {
                if let Some(d) = d {
                    last.store(d.add(end - V::BYTES));
                }
                acc[0] = acc[0].add_words(last.and(mask));
                words += V::BYTES / 2;
            }
            (total + total_of(acc) as i64, words, odd)
        };
        // Undo the bias, 0x8000 for each word passed through `add_words`: the exact sum.
        (total + 0x8000 * words as i64) as u64 + odd
    }

    /// The kernel's main loop from `*o` to `end` (a multiple of the step further) into
    /// fresh accumulators, copying to `d` if given.
    ///
    /// # Safety
    /// The CPU must support `V`'s instruction set; `s` and `d` must be valid for reads /
    /// writes of `*o..end`. (Not a closure: those do not inherit `target_feature`, and the
    /// intrinsics would not inline.)
    #[inline(always)]
    unsafe fn main_loop<V: Vector>(s: *const u8, d: Option<*mut u8>, o: &mut usize, end: usize) -> [V; UNROLL] {
        let step = V::BYTES * UNROLL;
        // SAFETY: the function's contract.
        unsafe {
            let mut acc = [V::zero(); UNROLL];
            while *o < end {
                for (k, acc) in acc.iter_mut().enumerate() {
                    let mut x = V::load(s.add(*o + k * V::BYTES));
                    if let Some(d) = d {
                        x = x.opaque();
                        x.store(d.add(*o + k * V::BYTES));
                    }
                    *acc = acc.add_words(x);
                }
                *o += step;
            }
            acc
        }
    }

    /// The sum of all `i32` lanes of a set of accumulators, which must not overflow.
    ///
    /// # Safety
    /// The CPU must support `V`'s instruction set.
    #[inline(always)]
    unsafe fn total_of<V: Vector>(acc: [V; UNROLL]) -> i32 {
        // SAFETY: the CPU supports `V` (this function's contract). (A loop, not a closure
        // passed to `reduce`: closures do not inherit `target_feature`.)
        unsafe {
            let mut sum = acc[0];
            for a in &acc[1..] {
                sum = sum.add(*a);
            }
            sum.hsum()
        }
    }

    /// 32 zero bytes then 32 0xff: a 16- or 32-byte load from it is a mask of trailing
    /// 0xff bytes.
    static TAIL_MASKS: [u8; 64] = {
        let mut m = [0u8; 64];
        let mut i = 32;
        while i < 64 {
            m[i] = 0xff;
            i += 1;
        }
        m
    };

    /// The kernel with SSE2 (always present on x86_64: the module's `cfg`).
    #[inline(never)]
    pub(super) fn sum_sse2(data: &[u8]) -> u64 {
        // SAFETY: SSE2 is statically enabled.
        unsafe { kernel::<Sse2>(None, data) }
    }

    /// The copying kernel with SSE2. `dst.len() == src.len()`.
    #[inline(never)]
    pub(super) fn copy_sum_sse2(dst: &mut [u8], src: &[u8]) -> u64 {
        // SAFETY: SSE2 is statically enabled.
        unsafe { kernel::<Sse2>(Some(dst), src) }
    }

    /// The kernel with AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_avx2(data: &[u8]) -> u64 {
        // SAFETY: the CPU supports AVX2 (this function's contract).
        unsafe { kernel::<Avx2>(None, data) }
    }

    /// The copying kernel with AVX2. `dst.len() == src.len()`.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_sum_avx2(dst: &mut [u8], src: &[u8]) -> u64 {
        // SAFETY: the CPU supports AVX2 (this function's contract).
        unsafe { kernel::<Avx2>(Some(dst), src) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive reference: big-endian words, end-around carry at every step.
    fn naive(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    fn bytes(seed: u32, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 24) as u8
            })
            .collect()
    }

    /// A native-sum implementation: copying into the destination if given.
    type Impl<'a> = &'a dyn Fn(Option<&mut [u8]>, &[u8]) -> u64;

    /// Checks one native-sum implementation (copying or not) against `naive` on `data`, at
    /// source and destination offsets `0..4`.
    fn check(name: &str, data: &[u8], f: Impl) {
        for align in 0..4 {
            let mut buf = vec![0u8; data.len() + align];
            buf[align..].copy_from_slice(data);
            let src = &buf[align..];
            let want = naive(src);
            assert_eq!(to_be_sum(f(None, src)), want, "{name} sum, len {} align {align}", src.len());
            let mut out = vec![0x5au8; src.len() + 4];
            let got = to_be_sum(f(Some(&mut out[(align + 1) % 4..][..src.len()]), src));
            assert_eq!(got, want, "{name} copy, len {} align {align}", src.len());
            assert_eq!(&out[(align + 1) % 4..][..src.len()], src, "{name} copy, len {}", src.len());
        }
    }

    /// A field holding the pseudo-header sum, completed as a device completes it, makes the
    /// whole verify: the pseudo-header's sum plus the segment's sums to all ones. A field
    /// outside the packet is refused.
    #[test]
    fn a_partial_checksum_completes_to_one_that_verifies() {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut seg = bytes(5, 57);
        seg[16..18].copy_from_slice(&pseudo_header(src, dst, 6, 57).to_be_bytes());
        let mut frame = vec![0xabu8; 14];
        frame.extend_from_slice(&seg);
        assert!(complete_partial(&mut frame, 14, 16));
        let field = u16::from_be_bytes([frame[30], frame[31]]);
        seg[16..18].fill(0);
        assert_eq!(field, finish(add(pseudo_header(src, dst, 6, 57), sum(&seg))));
        assert!(!complete_partial(&mut frame, 14, 56), "the field past the end");
        assert!(!complete_partial(&mut frame, usize::MAX, 16));
    }

    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
        assert_eq!(finish(sum(&data)), 0x220d);
        let mut dst = [0; 8];
        assert_eq!(copy_and_sum(&mut dst, &data), 0xddf2);
        assert_eq!(dst, data);
    }

    #[test]
    fn fold_edges() {
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xffff), 0xffff);
        assert_eq!(fold(0x1_0000), 1);
        assert_eq!(fold(0xffff_ffff), 0xffff);
        assert_eq!(fold(0x1_0000_0000), 1);
        assert_eq!(fold(u64::MAX), 0xffff);
        assert_eq!(fold(0xffff_0000_0000_0001), 0x0001);
    }

    #[test]
    fn scalar_tails() {
        for len in 0..SMALL {
            check("tail", &bytes(len as u32, len), &|d, s| match d {
                Some(d) => tail_copy_sum(d, s),
                None => tail_sum(s),
            });
        }
    }

    #[test]
    fn portable_loops() {
        // Under Miri (safe code, every step interpreted): fewer lengths.
        let lens: Vec<usize> = if cfg!(miri) {
            (0..130).chain([4097]).collect()
        } else {
            (0..700).chain([4095, 4096, 4097, 5000]).collect()
        };
        for len in lens {
            check("portable", &bytes(len as u32, len), &|d, s| match d {
                Some(d) => copy_sum_blocked(d, s),
                None => sum_body(s),
            });
        }
    }

    /// Both x86 kernels directly (the dispatch picks only one on a given machine).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[test]
    fn x86_kernels() {
        let avx2 = std::is_x86_feature_detected!("avx2");
        let sse2 = |d: Option<&mut [u8]>, s: &[u8]| match d {
            Some(d) => x86::copy_sum_sse2(d, s),
            None => x86::sum_sse2(s),
        };
        // SAFETY (both calls): only made when the CPU has AVX2.
        let avx = |d: Option<&mut [u8]>, s: &[u8]| match d {
            Some(d) => unsafe { x86::copy_sum_avx2(d, s) },
            None => unsafe { x86::sum_avx2(s) },
        };
        // Under Miri, which interprets every step: each length modulo the kernel's step (64)
        // twice over, and one long odd length.
        let lens: Vec<usize> = if cfg!(miri) {
            (SMALL..SMALL + 130).chain([4097]).collect()
        } else {
            (SMALL..700).chain([1460, 1461, 4095, 4096, 4097]).collect()
        };
        for len in lens {
            let data = bytes(len as u32, len);
            check("sse2", &data, &sse2);
            if avx2 {
                check("avx2", &data, &avx);
            }
        }
    }

    /// The words at the extremes of the kernel's bias (0x0000 and 0xffff), over more than
    /// one set of `i32` accumulators (`x86::SUB` is 64 KiB), at the largest and smallest
    /// per-lane values.
    #[test]
    fn extreme_words_across_accumulator_sets() {
        // Under Miri, which interprets every step: one length past a set, with a tail.
        let lens: &[usize] = if cfg!(miri) {
            &[(1 << 16) + 77]
        } else {
            &[(1 << 16) - 1, 1 << 16, (1 << 16) + 1, 3 << 16, (3 << 16) + 77]
        };
        for fill in [0x00, 0xff] {
            for &len in lens {
                let data = vec![fill; len];
                let want = naive(&data);
                assert_eq!(sum(&data), want, "fill {fill:#x} len {len}");
                let mut out = vec![0; len];
                assert_eq!(copy_and_sum(&mut out, &data), want, "fill {fill:#x} len {len}");
                assert_eq!(out, data);
            }
        }
        if !cfg!(miri) {
            let data = bytes(1, 5 << 16);
            assert_eq!(sum(&data), naive(&data));
        }
    }

    #[test]
    #[should_panic]
    fn copy_and_sum_short_dst_panics() {
        copy_and_sum(&mut [0; 3], &[1, 2, 3, 4]);
    }
}
