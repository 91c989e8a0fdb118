//! CUBIC (RFC 9438), in integer arithmetic, with HyStart++ (RFC 9406) as an option.
//!
//! Windows are bytes, times microseconds. The cubic term `C (t - K)^3` is computed in i128
//! with C = 0.4 segments/s^3 as the rational 4/10; K comes from an integer cube root.
//! β = 7/10 and the Reno-friendly α = 3(1-β)/(1+β) = 9/17 are rationals too.

use super::newreno::abc_limit;
use super::{initial_window, Ack, Acks, CongestionControl};
use crate::time::{Duration, Instant};

/// Options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CubicConfig {
    /// Leave slow start early when the RTT rises (RFC 9406).
    pub hystart: bool,
}

const BETA_NUM: u64 = 7;
const BETA_DEN: u64 = 10;
const C_NUM: i128 = 4;
const C_DEN: i128 = 10;
/// Microseconds per second, cubed: converts µs^3 to s^3.
const US3: i128 = 1_000_000_000_000_000_000;

// RFC 9406 §4.3 constants.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: u32 = 4;
const CSS_ROUNDS: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    SlowStart,
    /// HyStart++'s conservative slow start, with the round it began in.
    Css {
        rounds: u32,
        baseline: Duration,
    },
    Avoidance,
}

/// HyStart++ per-round RTT tracking.
#[derive(Debug, Clone, Copy)]
struct Rounds {
    window_end: u64,
    last_min: Option<Duration>,
    current_min: Option<Duration>,
    samples: u32,
}

/// CUBIC's window (RFC 9438) in integer arithmetic, optionally with HyStart++ (RFC 9406).
#[derive(Debug, Clone)]
pub struct Cubic {
    config: CubicConfig,
    smss: u32,
    st: State,
    /// The state before the last loss response, until a timeout or an undo (RFC 9438 §4.9).
    prior: Option<State>,
}

/// Everything a loss response changes, kept together so that it can be saved whole and
/// taken back if the response proves unnecessary.
#[derive(Debug, Clone, Copy)]
struct State {
    cwnd: u32,
    ssthresh: u32,
    phase: Phase,
    /// W_max: the window before the last reduction (bytes).
    w_max: u32,
    /// cwnd just before the last reduction (RFC 9438 §4.6 cwnd_prior).
    cwnd_prior: u32,
    /// Start of the current congestion-avoidance epoch and its K (µs).
    epoch: Option<(Instant, u64)>,
    /// Reno-friendly estimate W_est, bytes × 1024.
    w_est: u64,
    /// The next epoch takes K = 0 and W_max = cwnd at its start: after an RTO (§4.8), or
    /// when HyStart++ ended slow start without a loss and there is no W_max (§4.10).
    restart_at_cwnd: bool,
    /// In the slow start that follows a retransmission timeout (RFC 3465 §2.3: L = 1 SMSS).
    after_rto: bool,
    rounds: Rounds,
}

/// ⌊∛x⌋ by Newton's method on integers.
pub(crate) fn icbrt(x: u128) -> u128 {
    if x < 2 {
        return x;
    }
    // Start above the root: 2^(ceil(bits/3)).
    let bits = 128 - x.leading_zeros();
    let mut y: u128 = 1 << bits.div_ceil(3);
    loop {
        let next = (2 * y + x / (y * y)) / 3;
        if next >= y {
            break;
        }
        y = next;
    }
    while (y + 1) * (y + 1) * (y + 1) <= x {
        y += 1;
    }
    while y * y * y > x {
        y -= 1;
    }
    y
}

impl Cubic {
    /// A controller for send MSS `smss` with an initial window of `iw_segments` (RFC 6928: 10).
    pub fn new(smss: u32, iw_segments: u32, config: CubicConfig) -> Cubic {
        let smss = smss.max(1);
        let cwnd = initial_window(smss, iw_segments);
        let st = State {
            cwnd,
            ssthresh: u32::MAX,
            phase: Phase::SlowStart,
            w_max: 0,
            cwnd_prior: 0,
            epoch: None,
            w_est: (cwnd as u64) << 10,
            restart_at_cwnd: false,
            after_rto: false,
            rounds: Rounds { window_end: 0, last_min: None, current_min: None, samples: 0 },
        };
        Cubic { config, smss, st, prior: None }
    }

    /// K of RFC 9438 eq. 2, microseconds: ∛((W_max − cwnd_epoch) / C), with windows in
    /// segments and K in seconds.
    pub fn k_micros(w_max: u32, cwnd_epoch: u32, smss: u32) -> u64 {
        if w_max <= cwnd_epoch {
            return 0;
        }
        // (Δ bytes / smss) segments / C seconds^3 → µs^3 = Δ * C_DEN * 1e18 / (smss * C_NUM)
        let d = (w_max - cwnd_epoch) as u128;
        let us3 = d * (C_DEN as u128) * (US3 as u128) / (smss as u128 * C_NUM as u128);
        icbrt(us3) as u64
    }

    /// W_cubic(t) of RFC 9438 eq. 1, bytes.
    pub fn w_cubic(t: Duration, k_us: u64, w_max: u32, smss: u32) -> u64 {
        let dt = (t.as_micros() as i128 - k_us as i128).clamp(-4_000_000_000, 4_000_000_000);
        let term = C_NUM * dt * dt * dt * smss as i128 / (C_DEN * US3);
        (w_max as i128 + term).clamp(0, u32::MAX as i128) as u64
    }

    fn congestion_event(&mut self, flight: u32) {
        // §4.7 fast convergence: a flow that lost before reaching its previous W_max
        // releases bandwidth for newer flows.
        self.st.w_max = if self.st.cwnd < self.st.w_max {
            (self.st.cwnd as u64 * (BETA_DEN + BETA_NUM) / (2 * BETA_DEN)) as u32
        } else {
            self.st.cwnd
        };
        self.st.cwnd_prior = self.st.cwnd;
        // §4.6: ssthresh = flight_size × β, at least 2 SMSS.
        let reduced = (flight.max(self.smss) as u64 * BETA_NUM / BETA_DEN) as u32;
        self.st.ssthresh = reduced.max(2 * self.smss);
        self.st.epoch = None;
        // This loss sets W_max; an earlier RTO's or HyStart++'s restart no longer applies.
        self.st.restart_at_cwnd = false;
        self.st.phase = Phase::Avoidance;
    }

    fn slow_start(&mut self, ack: &Ack) {
        // L for a sender that does not pace (RFC 9406 §4.3 allows infinity): RFC 3465's, as
        // NewReno's, so that slow start is the same under both.
        let mut grow = ack.acked.min(abc_limit(self.st.after_rto) * self.smss);
        if self.config.hystart {
            self.hystart_round(ack);
            if let Phase::Css { .. } = self.st.phase {
                grow /= CSS_GROWTH_DIVISOR;
            }
        }
        self.st.cwnd = self.st.cwnd.saturating_add(grow);
        if self.st.cwnd >= self.st.ssthresh {
            self.st.cwnd = self.st.ssthresh;
            self.st.phase = Phase::Avoidance;
        }
    }

    /// RFC 9406 §4.2.
    fn hystart_round(&mut self, ack: &Ack) {
        let r = &mut self.st.rounds;
        if let Some(rtt) = ack.rtt {
            r.current_min = Some(r.current_min.map_or(rtt, |m| m.min(rtt)));
            r.samples += 1;
        }
        let round_over = ack.ack_seq >= r.window_end;
        match self.st.phase {
            Phase::SlowStart => {
                if r.samples >= N_RTT_SAMPLE {
                    if let (Some(cur), Some(last)) = (r.current_min, r.last_min) {
                        let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                        if cur >= last + thresh {
                            self.st.phase = Phase::Css { rounds: 0, baseline: cur };
                        }
                    }
                }
            }
            Phase::Css { rounds, baseline } => {
                if r.samples >= N_RTT_SAMPLE && r.current_min.is_some_and(|c| c < baseline) {
                    // The RTT fell back: the rise was spurious; resume slow start.
                    self.st.phase = Phase::SlowStart;
                } else if round_over {
                    if rounds + 1 >= CSS_ROUNDS {
                        // RFC 9406 §4.2: enter congestion avoidance with ssthresh = cwnd.
                        // RFC 9438 §4.10: no loss, so no W_max yet: cwnd_prior = cwnd, and
                        // the cubic curve starts here with K = 0 and W_max = cwnd.
                        self.st.ssthresh = self.st.cwnd;
                        self.st.cwnd_prior = self.st.cwnd;
                        self.st.restart_at_cwnd = true;
                        self.st.phase = Phase::Avoidance;
                    } else {
                        self.st.phase = Phase::Css { rounds: rounds + 1, baseline };
                    }
                }
            }
            Phase::Avoidance => {}
        }
        if round_over {
            r.last_min = r.current_min;
            r.current_min = None;
            r.samples = 0;
            r.window_end = ack.snd_max;
        }
    }

    /// Congestion avoidance for one ACK. `curve` keeps W_cubic(t + RTT) and W_cubic(t)
    /// across the ACKs of one [`on_acks`](CongestionControl::on_acks) call: they share `now`
    /// and the smoothed RTT, and the epoch, once begun, does not change inside the call, so
    /// the cubic function (i128 arithmetic) runs once per call, not once per ACK.
    #[inline(always)]
    fn avoidance(&mut self, ack: &Ack, curve: &mut Option<(u64, u64)>) {
        let (start, k) = match self.st.epoch {
            Some(e) => e,
            None => {
                if self.st.restart_at_cwnd {
                    // §4.8 / §4.10: K = 0 and W_max is the window at this point.
                    self.st.w_max = self.st.cwnd;
                    self.st.restart_at_cwnd = false;
                }
                let k = Cubic::k_micros(self.st.w_max, self.st.cwnd, self.smss);
                self.st.w_est = (self.st.cwnd as u64) << 10;
                let e = (ack.now, k);
                self.st.epoch = Some(e);
                e
            }
        };
        let (ahead, w_cubic_now) = *curve.get_or_insert_with(|| {
            let t = ack.now.saturating_duration_since(start);
            let rtt = ack.srtt.unwrap_or(Duration::ZERO);
            (Cubic::w_cubic(t + rtt, k, self.st.w_max, self.smss), Cubic::w_cubic(t, k, self.st.w_max, self.smss))
        });
        // §4.4: aim at W_cubic one RTT ahead, within [cwnd, 1.5 cwnd].
        let cwnd = self.st.cwnd as u64;
        let target = ahead.clamp(cwnd, cwnd + cwnd / 2);
        // §4.3: Reno-friendly estimate, α = 9/17 until it reaches cwnd_prior, then 1.
        let (an, ad) = if (self.st.w_est >> 10) >= self.st.cwnd_prior as u64 { (1, 1) } else { (9, 17) };
        self.st.w_est += (an * self.smss as u64 * ack.acked as u64 * 1024) / (ad * cwnd.max(1));
        let w_est = self.st.w_est >> 10;
        let next = if w_cubic_now < w_est {
            // Reno-friendly region.
            w_est.max(cwnd)
        } else {
            // Concave or convex region: (target − cwnd)/cwnd per SMSS acknowledged.
            cwnd + (target - cwnd) * ack.acked as u64 / cwnd.max(1)
        };
        self.st.cwnd = next.min(u32::MAX as u64) as u32;
    }

    /// One ACK (see [`Cubic::avoidance`] for `curve`).
    #[inline(always)]
    fn one(&mut self, ack: &Ack, curve: &mut Option<(u64, u64)>) {
        if self.st.cwnd < self.st.ssthresh && self.st.phase != Phase::Avoidance {
            self.slow_start(ack);
        } else if self.st.cwnd < self.st.ssthresh {
            // After an RTO (or an idle restart): slow start back up to ssthresh (RFC 5681).
            let l = abc_limit(self.st.after_rto);
            self.st.cwnd = self.st.cwnd.saturating_add(ack.acked.min(l * self.smss)).min(self.st.ssthresh);
            if self.st.cwnd >= self.st.ssthresh {
                self.st.after_rto = false;
            }
        } else {
            self.st.phase = Phase::Avoidance;
            self.avoidance(ack, curve);
        }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        if self.config.hystart {
            "cubic+hystart"
        } else {
            "cubic"
        }
    }

    fn cwnd(&self) -> u32 {
        self.st.cwnd
    }

    fn ssthresh(&self) -> u32 {
        self.st.ssthresh
    }

    fn on_ack(&mut self, ack: &Ack) {
        self.one(ack, &mut None);
    }

    fn on_acks(&mut self, acks: &Acks) {
        // Slow start without HyStart++, or back up to ssthresh after a timeout: if cwnd plus
        // every ACK's min(acked, L) stays below ssthresh, no ACK of the run reached it (cwnd
        // only rises), so each grew cwnd by its min(acked, L) (RFC 3465 §2.2) and nothing
        // else changed.
        if self.st.cwnd < self.st.ssthresh && (self.st.phase == Phase::Avoidance || !self.config.hystart) {
            let grow = acks.limited_total(abc_limit(self.st.after_rto) * self.smss);
            if self.st.cwnd as u64 + grow < self.st.ssthresh as u64 {
                self.st.cwnd += grow as u32;
                return;
            }
        }
        // Otherwise each ACK in turn (slow start's min(acked, L), HyStart++'s round and RTT tracking
        // and the per-ACK growth toward the target are per ACK, RFC 3465 §2.2, RFC 9406
        // §4.2, RFC 9438 §4.4), with the cubic curve evaluated once for the run.
        let mut curve = None;
        for i in 0..acks.len() {
            self.one(&acks.ack(i), &mut curve);
        }
    }

    fn on_loss(&mut self, _now: Instant, flight: u32) {
        self.prior = Some(self.st);
        self.congestion_event(flight);
        self.st.cwnd = self.st.ssthresh;
        self.st.after_rto = false;
    }

    fn on_rto(&mut self, _now: Instant, flight: Option<u32>) {
        if let Some(flight) = flight {
            self.congestion_event(flight);
        } else {
            self.st.epoch = None;
        }
        self.st.cwnd = self.smss;
        self.st.restart_at_cwnd = true;
        self.st.after_rto = true;
        self.prior = None;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.st.cwnd = self.st.ssthresh;
    }

    fn on_spurious_loss(&mut self, _now: Instant) {
        // RFC 9438 §4.9: cwnd, ssthresh, W_max, cwnd_prior (and with it K), the epoch and
        // W_est as they were before the congestion event; cwnd not below the present one.
        // HyStart++'s round tracking and the after-timeout byte counting come back too.
        if let Some(p) = self.prior.take() {
            let now = self.st;
            self.st = p;
            self.st.cwnd = now.cwnd.max(p.cwnd);
            self.st.ssthresh = now.ssthresh.max(p.ssthresh);
        }
    }

    fn on_idle(&mut self, _now: Instant, restart_window: u32) {
        self.st.cwnd = self.st.cwnd.min(restart_window);
        // The epoch's clock should not count the idle time as growth time.
        self.st.epoch = None;
        // Nor may an undo bring back the window from before the idle time (RFC 5681 §4.1).
        self.prior = None;
    }

    fn set_smss(&mut self, smss: u32) {
        self.smss = smss.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMSS: u32 = 1000;

    fn ack(now: Instant, acked: u32, srtt_ms: u64) -> Ack {
        Ack { now, acked, rtt: None, srtt: Some(Duration::from_millis(srtt_ms)), ack_seq: 0, snd_max: 0 }
    }

    #[test]
    fn integer_cube_root() {
        for x in [0u128, 1, 7, 8, 26, 27, 1000, 999, 1_000_000_000_000, u64::MAX as u128] {
            let r = icbrt(x);
            assert!(r * r * r <= x && (r + 1) * (r + 1) * (r + 1) > x, "x={x} r={r}");
        }
    }

    #[test]
    fn k_matches_rfc_9438_eq_2() {
        // W_max = 100 segments, cwnd_epoch = 70 (β = 0.7): K = ∛(30 / 0.4) = ∛75 = 4.2172 s.
        let k = Cubic::k_micros(100 * SMSS, 70 * SMSS, SMSS);
        assert!((4_217_000..4_218_000).contains(&k), "K = {k} µs");
    }

    #[test]
    fn w_cubic_matches_rfc_9438_eq_1_at_given_times() {
        // W_cubic(t) = 0.4 (t − K)^3 + W_max, segments and seconds.
        let (w_max, k) = (100 * SMSS, Cubic::k_micros(100 * SMSS, 70 * SMSS, SMSS));
        let at = |s: f64| Cubic::w_cubic(Duration::from_secs_f64(s), k, w_max, SMSS) as f64 / SMSS as f64;
        let model = |s: f64| 0.4 * (s - 75f64.cbrt()).powi(3) + 100.0;
        for t in [0.0, 1.0, 2.0, 4.2172, 6.0, 10.0] {
            assert!((at(t) - model(t)).abs() < 0.01, "t={t}: {} vs {}", at(t), model(t));
        }
        assert!((at(0.0) - 70.0).abs() < 0.01, "starts at β W_max");
    }

    #[test]
    fn loss_reduces_by_beta_with_fast_convergence() {
        // RFC 9438 §4.6-4.7.
        let mut c = Cubic::new(SMSS, 10, CubicConfig::default());
        c.st.cwnd = 100 * SMSS;
        c.on_loss(Instant::ZERO, 100 * SMSS);
        assert_eq!((c.cwnd(), c.ssthresh(), c.st.w_max), (70 * SMSS, 70 * SMSS, 100 * SMSS));
        // A second loss below W_max: W_max = cwnd (1 + β) / 2.
        c.on_loss(Instant::ZERO, 70 * SMSS);
        assert_eq!(c.st.w_max, 70 * SMSS * 17 / 20);
        assert_eq!(c.ssthresh(), 49 * SMSS);
    }

    #[test]
    fn an_unnecessary_loss_response_restores_the_curve() {
        // RFC 9438 §4.9: after a spurious congestion event the state before it comes back —
        // cwnd, ssthresh, W_max, cwnd_prior, the epoch and W_est — so the curve continues
        // where it was. Only the last response, once; not after a timeout.
        let mut c = Cubic::new(SMSS, 10, CubicConfig::default());
        c.st.cwnd = 100 * SMSS;
        c.on_loss(Instant::ZERO, 100 * SMSS);
        let now = Instant::from_secs(1);
        for _ in 0..20 {
            c.on_ack(&ack(now, SMSS, 100));
        }
        let before = (c.cwnd(), c.ssthresh(), c.st.w_max, c.st.cwnd_prior, c.st.epoch, c.st.w_est);
        c.on_loss(now, c.cwnd());
        assert!(c.cwnd() < before.0 && c.st.w_max != before.2);
        c.on_ack(&ack(now, SMSS, 100));
        c.on_spurious_loss(now);
        assert_eq!((c.cwnd(), c.ssthresh(), c.st.w_max, c.st.cwnd_prior, c.st.epoch, c.st.w_est), before);
        c.on_spurious_loss(now);
        assert_eq!(c.cwnd(), before.0, "only once");
        c.on_loss(now, c.cwnd());
        c.on_rto(now, None);
        c.on_spurious_loss(now);
        assert_eq!(c.cwnd(), SMSS, "a timeout came after the loss: nothing to undo");
        c.st.cwnd = 50 * SMSS;
        c.on_loss(now, c.cwnd());
        c.on_idle(now, 10 * SMSS);
        c.on_spurious_loss(now);
        assert_eq!(c.cwnd(), 10 * SMSS, "nor after an idle restart");
    }

    #[test]
    fn slow_start_after_a_timeout_counts_one_smss_per_ack() {
        // RFC 3465 §2.3, as in NewReno: L = 1 SMSS until cwnd is back at ssthresh.
        let mut c = Cubic::new(SMSS, 10, CubicConfig::default());
        c.st.cwnd = 20 * SMSS;
        c.on_rto(Instant::ZERO, Some(20 * SMSS));
        assert_eq!((c.cwnd(), c.ssthresh()), (SMSS, 14 * SMSS));
        c.on_ack(&ack(Instant::ZERO, 3 * SMSS, 10));
        assert_eq!(c.cwnd(), 2 * SMSS);
    }

    #[test]
    fn cwnd_follows_the_cubic_curve_in_avoidance() {
        // Start an epoch right after a loss at W_max = 100 segments; with one ACK of a full
        // window per RTT of 100 ms, cwnd tracks W_cubic(t + RTT) within a segment or two.
        let mut c = Cubic::new(SMSS, 10, CubicConfig::default());
        c.st.cwnd = 100 * SMSS;
        c.st.w_max = 100 * SMSS;
        c.on_loss(Instant::ZERO, 100 * SMSS);
        let k = Cubic::k_micros(100 * SMSS, 70 * SMSS, SMSS);
        let mut now = Instant::from_secs(1);
        let start = now;
        for _ in 0..60 {
            // One RTT: a window of ACKs, one per segment.
            let n = c.cwnd() / SMSS;
            for _ in 0..n {
                c.on_ack(&ack(now, SMSS, 100));
            }
            now += Duration::from_millis(100);
            let t = now - start;
            let model = Cubic::w_cubic(t, k, 100 * SMSS, SMSS) as i64;
            let got = c.cwnd() as i64;
            assert!((got - model).abs() <= 3 * SMSS as i64, "t={t:?}: cwnd {got} model {model}");
        }
        assert!(c.cwnd() > 100 * SMSS, "convex region reached after K");
    }

    #[test]
    fn reno_friendly_region_on_short_rtts() {
        // With tiny RTTs the cubic curve grows slower than Reno; W_est takes over (§4.3).
        let mut c = Cubic::new(SMSS, 10, CubicConfig::default());
        c.st.cwnd = 20 * SMSS;
        c.on_loss(Instant::ZERO, 20 * SMSS);
        let mut now = Instant::from_secs(1);
        for _ in 0..200 {
            let n = c.cwnd() / SMSS;
            for _ in 0..n {
                c.on_ack(&ack(now, SMSS, 1));
            }
            now += Duration::from_millis(1);
        }
        // 200 RTTs of Reno-friendly growth at α = 9/17 then 1 per RTT: well past W_max.
        assert!(c.cwnd() > 60 * SMSS, "cwnd {}", c.cwnd());
    }

    #[test]
    fn hystart_leaves_slow_start_when_rtt_rises() {
        // RFC 9406 §4.2: 8 samples per round; a round whose min RTT exceeds the last
        // round's by the threshold moves to conservative slow start, then to avoidance
        // after CSS_ROUNDS rounds.
        let mut c = Cubic::new(SMSS, 10, CubicConfig { hystart: true });
        let mut seq = 0u64;
        let mut round = |c: &mut Cubic, rtt_ms: u64, rounds_done: &mut u64| {
            let end = seq + 10 * SMSS as u64;
            for _ in 0..10 {
                seq += SMSS as u64;
                let a = Ack {
                    now: Instant::from_millis(*rounds_done * 100),
                    acked: SMSS,
                    rtt: Some(Duration::from_millis(rtt_ms)),
                    srtt: Some(Duration::from_millis(rtt_ms)),
                    ack_seq: seq,
                    snd_max: end + 10 * SMSS as u64,
                };
                c.on_ack(&a);
            }
            *rounds_done += 1;
        };
        let mut n = 0;
        round(&mut c, 50, &mut n);
        round(&mut c, 50, &mut n);
        assert_eq!(c.st.phase, Phase::SlowStart);
        round(&mut c, 70, &mut n); // +20 ms > clamp(50/8, 4, 16) = 6.25 ms
        assert!(matches!(c.st.phase, Phase::Css { .. }), "{:?}", c.st.phase);
        let before = c.cwnd();
        round(&mut c, 70, &mut n);
        assert!(c.cwnd() - before <= 10 * SMSS / CSS_GROWTH_DIVISOR + SMSS, "growth divided by 4");
        for _ in 0..CSS_ROUNDS {
            round(&mut c, 70, &mut n);
        }
        assert_eq!(c.st.phase, Phase::Avoidance);
        // ssthresh took cwnd at the switch; the round's remaining ACKs grew it in avoidance,
        // by (target − cwnd)/cwnd per ACK: well under one segment.
        assert!(c.ssthresh() <= c.cwnd() && c.cwnd() - c.ssthresh() < SMSS, "{} {}", c.ssthresh(), c.cwnd());
        // RFC 9438 §4.10: no loss yet, so the curve starts at the window where slow start
        // ended: W_max = cwnd_prior = that cwnd, K = 0.
        assert_eq!((c.st.w_max, c.st.cwnd_prior), (c.ssthresh(), c.ssthresh()));
        assert_eq!(c.st.epoch.map(|e| e.1), Some(0));
    }
}
