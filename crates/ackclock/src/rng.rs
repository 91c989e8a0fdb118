//! The one source of randomness of the simulator and of the impairment wrapper: xoshiro256** seeded through SplitMix64.
//!
//! Small, fast and fully specified (Blackman and Vigna, <https://prng.di.unimi.it/>), so the
//! same seed gives the same run on every platform and every build. No external crate: the
//! sequence must never change under a dependency update.

/// SplitMix64: expands one `u64` into well-mixed state words, and derives independent
/// streams (one per link direction) from the world's seed.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from state `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next output, advancing the state by the golden-ratio increment.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// xoshiro256**: the generator every impairment draws from.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose state is expanded from `seed` by SplitMix64 (never all zero).
    pub fn new(seed: u64) -> Rng {
        let mut sm = SplitMix64::new(seed);
        Rng { s: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()] }
    }

    /// An independent stream for `stream` (e.g. a link direction) under the same `seed`.
    pub fn derive(seed: u64, stream: u64) -> Rng {
        let mut sm = SplitMix64::new(seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        Rng::new(sm.next_u64())
    }

    /// The next uniformly distributed 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`, from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// Uniform in `[0, n)`; `n` must not be zero. Lemire's multiply-shift with rejection,
    /// so there is no modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0)");
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // First outputs for seed 0 (reference implementation).
        let mut sm = SplitMix64::new(0);
        assert_eq!(sm.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(sm.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn xoshiro_reference_values() {
        // State {1, 2, 3, 4}: the reference implementation gives 11520, 0, 1509978240.
        let mut r = Rng { s: [1, 2, 3, 4] };
        assert_eq!(r.next_u64(), 11520);
        assert_eq!(r.next_u64(), 0);
        assert_eq!(r.next_u64(), 1_509_978_240);
    }

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(42);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(42);
        assert!(a.iter().all(|&x| x == r.next_u64()));
        let mut s0 = Rng::derive(42, 0);
        let mut s1 = Rng::derive(42, 1);
        assert_ne!(s0.next_u64(), s1.next_u64());
    }

    #[test]
    fn draws_are_in_range_and_roughly_uniform() {
        let mut r = Rng::new(7);
        let mut buckets = [0u32; 10];
        for _ in 0..100_000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            buckets[r.below(10) as usize] += 1;
        }
        assert!(buckets.iter().all(|&b| (9_500..10_500).contains(&b)), "{buckets:?}");
        let hits = (0..100_000).filter(|_| r.chance(0.25)).count();
        assert!((24_000..26_000).contains(&hits), "{hits}");
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }
}
