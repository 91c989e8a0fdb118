//! The retransmission timer's estimator: Van Jacobson's mean and mean deviation in scaled
//! integer arithmetic (Jacobson and Karels 1988), as standardised by RFC 6298.
//!
//! `srtt` is kept scaled by 8 and `rttvar` by 4, so that the gains 1/8 and 1/4 are shifts and
//! no precision is lost to integer division:
//!
//! ```text
//! first sample R:   SRTT = R, RTTVAR = R/2
//! later samples:    RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|
//!                   SRTT   = 7/8 SRTT   + 1/8 R
//! RTO = SRTT + max(G, 4 RTTVAR), clamped to [min_rto, max_rto]      (RFC 6298 §2)
//! ```
//!
//! Times are microseconds. Backoff doubles the RTO per expiry (RFC 6298 §5.5) and is undone
//! by the next valid sample.

use crate::time::Duration;

/// Estimator settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttConfig {
    /// RTO before any sample (RFC 6298 §2.1: 1 s).
    pub initial_rto: Duration,
    /// Lower bound. Linux uses 200 ms (the default here); RFC 6298 §2.4 says 1 s.
    pub min_rto: Duration,
    /// Upper bound: 60 s (RFC 6298 §2.5 allows a maximum of at least 60 s).
    pub max_rto: Duration,
    /// Clock granularity G of RFC 6298 §2.
    pub granularity: Duration,
}

impl Default for RttConfig {
    fn default() -> Self {
        RttConfig {
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            granularity: Duration::from_millis(1),
        }
    }
}

/// Smoothed RTT, its mean deviation, and the RTO with its backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttEstimator {
    /// The configuration's bounds and granularity in µs, converted once.
    min_us: u64,
    max_us: u64,
    g_us: u64,
    /// SRTT × 8, µs; 0 before the first sample.
    srtt8: u64,
    /// RTTVAR × 4, µs.
    rttvar4: u64,
    /// RTO before backoff, µs.
    base_rto: u64,
    /// Number of consecutive doublings.
    backoff: u32,
    samples: u64,
}

/// Whole microseconds, saturating (without the u128 arithmetic of `as_micros`: this runs on
/// every ACK).
#[inline]
fn micros(d: Duration) -> u64 {
    d.as_secs().saturating_mul(1_000_000).saturating_add(d.subsec_micros() as u64)
}

impl RttEstimator {
    /// An estimator without samples, its RTO `initial_rto` clamped to `[min_rto, max_rto]`.
    pub fn new(config: RttConfig) -> RttEstimator {
        let (min_us, max_us, g_us) =
            (micros(config.min_rto), micros(config.max_rto).max(1), micros(config.granularity));
        let base_rto = micros(config.initial_rto).clamp(min_us.min(max_us), max_us);
        RttEstimator {
            min_us: min_us.min(max_us),
            max_us,
            g_us,
            srtt8: 0,
            rttvar4: 0,
            base_rto,
            backoff: 0,
            samples: 0,
        }
    }

    /// Feed one measurement (Karn's rule is the caller's: never a sample from a retransmitted
    /// segment unless timestamps tell which transmission it acknowledges).
    #[inline]
    pub fn sample(&mut self, rtt: Duration) {
        self.sample_us(micros(rtt));
    }

    /// [`sample`](Self::sample) of `us` microseconds (the echoed timestamp's milliseconds
    /// times 1,000 on every ACK: no `Duration` made and taken apart).
    #[inline]
    pub fn sample_us(&mut self, us: u64) {
        // A zero RTT would make the variance collapse on a fast path; count it as 1 µs.
        let r = us.max(1);
        if self.samples == 0 {
            self.srtt8 = r << 3;
            self.rttvar4 = (r >> 1) << 2;
        } else {
            let srtt = self.srtt8 >> 3;
            let err = srtt.abs_diff(r);
            // rttvar4 += |err| - rttvar4/4  (i.e. RTTVAR += 1/4 (|err| - RTTVAR)), scaled by 4.
            self.rttvar4 = self.rttvar4 - (self.rttvar4 >> 2) + err;
            // srtt8 += R - srtt8/8, scaled by 8.
            self.srtt8 = self.srtt8 - (self.srtt8 >> 3) + r;
        }
        self.samples += 1;
        let rto = (self.srtt8 >> 3).saturating_add(self.g_us.max(self.rttvar4));
        self.base_rto = rto.clamp(self.min_us, self.max_us);
        self.backoff = 0;
    }

    /// RFC 6298 §5.7: no sample yet and the SYN timed out: data starts with RTO = 3 s.
    pub fn syn_fallback(&mut self) {
        if self.samples == 0 && self.backoff > 0 {
            self.base_rto = 3_000_000u64.clamp(self.min_us, self.max_us);
            self.backoff = 0;
        }
    }

    /// The retransmission timeout, with backoff.
    #[inline]
    pub fn rto(&self) -> Duration {
        let rto = self.base_rto.checked_shl(self.backoff).unwrap_or(u64::MAX);
        Duration::from_micros(rto.min(self.max_us))
    }

    /// [`rto`](Self::rto) in nanoseconds (saturating), for the comparisons and deadlines
    /// made on every segment.
    #[inline]
    pub fn rto_nanos(&self) -> u64 {
        self.base_rto.checked_shl(self.backoff).unwrap_or(u64::MAX).min(self.max_us).saturating_mul(1_000)
    }

    /// The timer expired: double the RTO (RFC 6298 §5.5), up to the maximum.
    pub fn back_off(&mut self) {
        if self.base_rto.checked_shl(self.backoff).is_some_and(|r| r < self.max_us) {
            self.backoff += 1;
        }
    }

    /// Take one backoff back (RFC 6069 §3: the timeout was the path's, not congestion's).
    pub fn revert_back_off(&mut self) {
        self.backoff = self.backoff.saturating_sub(1);
    }

    /// How long `n + 1` expiries take from the first transmission with the RTO as it is
    /// before backoff, doubling each time up to the maximum: when the `n + 1`-th would
    /// come without RFC 6069's reverts (Linux `tcp_model_timeout`).
    pub fn backoff_total(&self, n: u32) -> Duration {
        let total: u64 = (0..=n.min(64))
            .map(|i| self.base_rto.checked_shl(i).unwrap_or(u64::MAX).min(self.max_us))
            .fold(0u64, u64::saturating_add);
        Duration::from_micros(total)
    }

    /// Consecutive backoffs since the last sample.
    pub fn backoff(&self) -> u32 {
        self.backoff
    }

    /// SRTT, if measured.
    pub fn srtt(&self) -> Option<Duration> {
        (self.samples > 0).then(|| Duration::from_micros(self.srtt8 >> 3))
    }

    /// RTTVAR (zero before the first sample).
    pub fn rttvar(&self) -> Duration {
        Duration::from_micros(self.rttvar4 >> 2)
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The least RTO, as configured ([`RttConfig::min_rto`], at most the greatest).
    pub fn min_rto(&self) -> Duration {
        Duration::from_micros(self.min_us)
    }

    /// The greatest RTO, as configured ([`RttConfig::max_rto`]).
    pub fn max_rto(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn initial_rto_is_one_second() {
        // RFC 6298 §2.1.
        let e = RttEstimator::new(RttConfig::default());
        assert_eq!(e.rto(), ms(1000));
        assert_eq!(e.srtt(), None);
    }

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        // RFC 6298 §2.2: SRTT = R, RTTVAR = R/2, RTO = SRTT + max(G, 4 RTTVAR).
        let mut e = RttEstimator::new(RttConfig::default());
        e.sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn later_samples_use_gains_one_eighth_and_one_quarter() {
        // RFC 6298 §2.3 with alpha = 1/8, beta = 1/4.
        let mut e = RttEstimator::new(RttConfig::default());
        e.sample(ms(100));
        e.sample(ms(200));
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
    }

    #[test]
    fn converges_and_respects_the_minimum() {
        let mut e = RttEstimator::new(RttConfig::default());
        for _ in 0..200 {
            e.sample(ms(10));
        }
        assert_eq!(e.srtt(), Some(ms(10)));
        assert_eq!(e.rto(), ms(200), "Linux-style minimum RTO");
        let mut strict = RttEstimator::new(RttConfig { min_rto: ms(1000), ..Default::default() });
        strict.sample(ms(10));
        assert_eq!(strict.rto(), ms(1000), "RFC 6298 §2.4 minimum");
    }

    #[test]
    fn granularity_floors_the_variance_term() {
        let mut e = RttEstimator::new(RttConfig { min_rto: Duration::ZERO, ..Default::default() });
        for _ in 0..100 {
            e.sample(ms(50));
        }
        // RTTVAR decays to ~0; the G term keeps RTO = SRTT + G.
        assert_eq!(e.rto(), ms(51));
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum_and_a_sample_undoes_it() {
        // RFC 6298 §5.5 and §2.5.
        let mut e = RttEstimator::new(RttConfig::default());
        let rtos: Vec<_> = (0..8)
            .map(|_| {
                let r = e.rto();
                e.back_off();
                r.as_secs()
            })
            .collect();
        assert_eq!(rtos, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        e.sample(ms(100));
        assert_eq!(e.backoff(), 0);
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn tracks_variance_as_seed_003_intends() {
        // Alternating 100/300 ms: the mean settles near 200 and the deviation near 100, so the
        // RTO covers the peaks instead of firing on every slow sample.
        let mut e = RttEstimator::new(RttConfig::default());
        for i in 0..400 {
            e.sample(ms(if i % 2 == 0 { 100 } else { 300 }));
        }
        let srtt = e.srtt().unwrap().as_millis();
        assert!((180..=220).contains(&srtt), "srtt {srtt}");
        assert!(e.rto() > ms(300), "rto {:?} must exceed the largest sample", e.rto());
    }
}
