//! One call for an aggregated pure ACK's original ACKs ([`CongestionControl::on_acks`]) leaves
//! every algorithm exactly where one call per original ACK leaves it (RFC 3465 §2.2: L is
//! counted per ACK; RFC 9438 §4.4 and RFC 9406 §4.2 are per ACK too).
//!
//! Two controllers of each algorithm hear the same random history: runs of ACKs (shares below
//! one SMSS, of one and two SMSS, and stretch ACKs above two; an RTT sample on the newest,
//! sometimes a FIN in its share), losses, timeouts with and without a new ssthresh, ends of
//! recovery, idle restarts and MSS changes between the runs. One hears each original ACK
//! through `on_ack`, built here as the receive path built them before the batched call (the
//! earlier ones without a sample, the newest with it and less the FIN); the other hears the
//! run through `on_acks`. After every event their windows and whole states are the same.

use super::{initial_window, Ack, Acks, Algorithm, CongestionControl, NewReno};
use crate::time::{Duration, Instant};
use proptest::prelude::*;

const SMSS: u32 = 1448;

#[derive(Debug, Clone)]
enum Event {
    /// A run of ACKs: each one's share in bytes; the time since the last event, the newest's
    /// RTT sample and the smoothed RTT (ms, before the trend is added); whether the newest's
    /// share includes a FIN; how far past the newest ACK the sender has sent.
    Acks {
        shares: Vec<u32>,
        dt_ms: u64,
        rtt_ms: Option<u64>,
        srtt_ms: Option<u64>,
        fin: bool,
        ahead: u32,
    },
    Loss,
    Rto {
        new_ssthresh: bool,
    },
    RecoveryEnd,
    /// The last loss response proved unnecessary.
    Undo,
    Idle,
    Smss(u32),
}

fn share() -> impl Strategy<Value = u32> {
    prop_oneof![1..SMSS, Just(SMSS), Just(2 * SMSS), (2 * SMSS + 1)..(6 * SMSS)]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        12 => (
            prop::collection::vec(share(), 1..24),
            0u64..300,
            prop::option::weighted(0.8, 1u64..40),
            prop::option::weighted(0.9, 1u64..200),
            prop::bool::weighted(0.05),
            0..48 * SMSS,
        )
            .prop_map(|(shares, dt_ms, rtt_ms, srtt_ms, fin, ahead)| Event::Acks {
                shares,
                dt_ms,
                rtt_ms,
                srtt_ms,
                fin,
                ahead
            }),
        1 => Just(Event::Loss),
        1 => any::<bool>().prop_map(|new_ssthresh| Event::Rto { new_ssthresh }),
        1 => Just(Event::RecoveryEnd),
        1 => Just(Event::Undo),
        1 => Just(Event::Idle),
        1 => prop_oneof![Just(SMSS), Just(1000u32), Just(536u32)].prop_map(Event::Smss),
    ]
}

/// A history that begins with a long slow start: short runs, each with an RTT sample, far
/// behind SND.MAX, so that HyStart++'s rounds see eight samples or more and, with a rising
/// RTT, enter and leave its conservative slow start; then anything.
fn history() -> impl Strategy<Value = Vec<Event>> {
    let run = (prop::collection::vec(share(), 1..6), 0u64..50, 1u64..20, 24 * SMSS..64 * SMSS).prop_map(
        |(shares, dt_ms, rtt_ms, ahead)| Event::Acks {
            shares,
            dt_ms,
            rtt_ms: Some(rtt_ms),
            srtt_ms: Some(rtt_ms),
            fin: false,
            ahead,
        },
    );
    (prop::collection::vec(run, 0..100), prop::collection::vec(event(), 1..160)).prop_map(|(mut a, b)| {
        a.extend(b);
        a
    })
}

/// A controller that does not specialise `on_acks`: the trait's default, over NewReno.
#[derive(Debug)]
struct Unspecialised(NewReno);

impl CongestionControl for Unspecialised {
    fn name(&self) -> &'static str {
        "unspecialised"
    }
    fn cwnd(&self) -> u32 {
        self.0.cwnd()
    }
    fn ssthresh(&self) -> u32 {
        self.0.ssthresh()
    }
    fn on_ack(&mut self, ack: &Ack) {
        self.0.on_ack(ack)
    }
    fn on_loss(&mut self, now: Instant, flight: u32) {
        self.0.on_loss(now, flight)
    }
    fn on_rto(&mut self, now: Instant, flight: Option<u32>) {
        self.0.on_rto(now, flight)
    }
    fn on_recovery_end(&mut self, now: Instant) {
        self.0.on_recovery_end(now)
    }
    fn on_spurious_loss(&mut self, now: Instant) {
        self.0.on_spurious_loss(now)
    }
    fn on_idle(&mut self, now: Instant, restart_window: u32) {
        self.0.on_idle(now, restart_window)
    }
    fn set_smss(&mut self, smss: u32) {
        self.0.set_smss(smss)
    }
}

/// Drive `separate` with one `on_ack` per original ACK and `batched` with `on_acks`; the
/// sequence space starts at `iss` (so that it wraps in some cases) and RTTs rise by
/// `trend` ms per event (so that HyStart++ sees rounds whose minimum rises).
fn same_windows(
    mut separate: Box<dyn CongestionControl>,
    mut batched: Box<dyn CongestionControl>,
    iss: u32,
    trend: u64,
    events: &[Event],
) -> Result<(), TestCaseError> {
    let mut now = Instant::from_secs(1);
    // SND.UNA and SND.MAX as offsets from the ISS (the SYN is acknowledged).
    let (mut una, mut snd_max) = (1u64, 1u64);
    let mut smss = SMSS;
    for (k, e) in events.iter().enumerate() {
        let flight = (snd_max - una) as u32;
        match e {
            Event::Acks { shares, dt_ms, rtt_ms, srtt_ms, fin, ahead } => {
                now += Duration::from_millis(*dt_ms);
                let rtt = rtt_ms.map(|r| Duration::from_millis(r + k as u64 * trend));
                let srtt = srtt_ms.map(|r| Duration::from_millis(r + k as u64 * trend));
                let unclaimed = *fin as u32;
                let mut numbers = Vec::with_capacity(shares.len());
                let mut at = una;
                for &s in shares {
                    at += s as u64;
                    numbers.push(iss.wrapping_add(at as u32));
                }
                snd_max = snd_max.max(at + *ahead as u64);
                // The per-ACK calls, as the receive path made them one by one.
                let mut at = una;
                for (i, &s) in shares.iter().enumerate() {
                    at += s as u64;
                    let newest = i + 1 == shares.len();
                    separate.on_ack(&Ack {
                        now,
                        acked: if newest { s.saturating_sub(unclaimed) } else { s },
                        rtt: if newest { rtt } else { None },
                        srtt,
                        ack_seq: at,
                        snd_max,
                    });
                }
                batched.on_acks(&Acks {
                    now,
                    rtt,
                    ecrs: &[],
                    ts_offset: 0,
                    srtt,
                    snd_max,
                    iss,
                    una: iss.wrapping_add(una as u32),
                    acks: &numbers,
                    unclaimed,
                });
                una = at;
            }
            Event::Loss => {
                separate.on_loss(now, flight);
                batched.on_loss(now, flight);
            }
            Event::Rto { new_ssthresh } => {
                let f = new_ssthresh.then_some(flight);
                separate.on_rto(now, f);
                batched.on_rto(now, f);
            }
            Event::RecoveryEnd => {
                separate.on_recovery_end(now);
                batched.on_recovery_end(now);
            }
            Event::Undo => {
                separate.on_spurious_loss(now);
                batched.on_spurious_loss(now);
            }
            Event::Idle => {
                let w = initial_window(smss, 10);
                separate.on_idle(now, w);
                batched.on_idle(now, w);
            }
            Event::Smss(s) => {
                smss = *s;
                separate.set_smss(smss);
                batched.set_smss(smss);
            }
        }
        prop_assert_eq!(separate.cwnd(), batched.cwnd(), "cwnd after event {} ({:?})", k, e);
        prop_assert_eq!(separate.ssthresh(), batched.ssthresh(), "ssthresh after event {} ({:?})", k, e);
        prop_assert_eq!(format!("{separate:?}"), format!("{batched:?}"), "state after event {} ({:?})", k, e);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn newreno_batched_equals_per_ack(
        iss in any::<u32>(), trend in 0u64..4, events in history(),
    ) {
        let a = Algorithm::NewReno;
        same_windows(a.build(SMSS, 10), a.build(SMSS, 10), iss, trend, &events)?;
    }

    #[test]
    fn cubic_batched_equals_per_ack(
        iss in any::<u32>(), trend in 0u64..4, events in history(),
    ) {
        let a = Algorithm::Cubic { hystart: false };
        same_windows(a.build(SMSS, 10), a.build(SMSS, 10), iss, trend, &events)?;
    }

    #[test]
    fn cubic_hystart_batched_equals_per_ack(
        iss in any::<u32>(), trend in 0u64..4, events in history(),
    ) {
        let a = Algorithm::Cubic { hystart: true };
        same_windows(a.build(SMSS, 10), a.build(SMSS, 10), iss, trend, &events)?;
    }

    #[test]
    fn the_default_on_acks_equals_per_ack(
        iss in any::<u32>(), events in history(),
    ) {
        let build = || Box::new(Unspecialised(NewReno::new(SMSS, 10))) as Box<dyn CongestionControl>;
        same_windows(build(), build(), iss, 0, &events)?;
    }
}

#[test]
fn a_run_of_stretch_acks_grows_slow_start_by_l_per_ack() {
    // RFC 3465 §2.2: four ACKs of 3 SMSS each in slow start grow cwnd by 2 SMSS each (8 in
    // all), not by min(12 SMSS, 2 SMSS) as one ACK of the whole would.
    for algorithm in [Algorithm::NewReno, Algorithm::Cubic { hystart: false }, Algorithm::Cubic { hystart: true }] {
        let mut c = algorithm.build(SMSS, 10);
        let before = c.cwnd();
        let numbers: Vec<u32> = (1..=4).map(|i| 1 + i * 3 * SMSS).collect();
        let run = Acks {
            now: Instant::from_secs(1),
            rtt: None,
            ecrs: &[],
            ts_offset: 0,
            srtt: None,
            snd_max: 1 + 40 * SMSS as u64,
            iss: 0,
            una: 1,
            acks: &numbers,
            unclaimed: 0,
        };
        assert_eq!((run.len(), run.total(), run.acked(0), run.acked(3)), (4, 12 * SMSS, 3 * SMSS, 3 * SMSS));
        c.on_acks(&run);
        assert_eq!(c.cwnd(), before + 8 * SMSS, "{}", algorithm.name());
    }
}

#[test]
fn the_fin_is_taken_from_the_newest_share() {
    // The newest ACK's share less what the FIN took; the total counts the same.
    let numbers = [1 + SMSS, 1 + 2 * SMSS + 1];
    let run = Acks {
        now: Instant::ZERO,
        rtt: Some(Duration::from_millis(5)),
        ecrs: &[],
        ts_offset: 0,
        srtt: None,
        snd_max: 2 + 2 * SMSS as u64,
        iss: u32::MAX - 100,
        una: (u32::MAX - 100).wrapping_add(1),
        acks: &numbers.map(|n| n.wrapping_add(u32::MAX - 100)),
        unclaimed: 1,
    };
    assert_eq!((run.acked(0), run.acked(1), run.total()), (SMSS, SMSS, 2 * SMSS));
    let (first, newest) = (run.ack(0), run.ack(1));
    assert_eq!((first.rtt, first.ack_seq), (None, 1 + SMSS as u64));
    assert_eq!((newest.rtt, newest.ack_seq), (Some(Duration::from_millis(5)), 2 + 2 * SMSS as u64));
}
