//! Reading a sender's trace (one connection's records, in order): rounds of slow start,
//! fast-recovery episodes, RTT samples, and Jain's fairness index. Library only, so that
//! the library's scenario tests can include this file too.

use ackclock::tcp::trace::{Event, Record, Sample};
use ackclock::time::Instant;

/// Seconds since the epoch of virtual time.
pub fn secs(t: Instant) -> f64 {
    t.total_nanos() as f64 / 1e9
}

/// The state samples, with their time.
pub fn samples(records: &[Record]) -> Vec<(Instant, Sample)> {
    records
        .iter()
        .filter_map(|r| match r.event {
            Event::Sample(s) => Some((r.time, s)),
            _ => None,
        })
        .collect()
}

/// A data segment sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    pub time: Instant,
    pub seq: u64,
    pub len: u32,
    pub retransmit: bool,
}

pub fn sent(records: &[Record]) -> Vec<Sent> {
    records
        .iter()
        .filter_map(|r| match r.event {
            Event::Sent { seq, len, retransmit } => Some(Sent { time: r.time, seq, len, retransmit }),
            _ => None,
        })
        .collect()
}

/// An ACK received: cumulative ACK and SACK blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct AckSeen {
    pub time: Instant,
    pub ack: u64,
    pub sack: Vec<(u64, u64)>,
}

pub fn acks(records: &[Record]) -> Vec<AckSeen> {
    records
        .iter()
        .filter_map(|r| match r.event {
            Event::Ack { ack, sack, sack_len } => {
                Some(AckSeen { time: r.time, ack, sack: sack[..sack_len as usize].to_vec() })
            }
            _ => None,
        })
        .collect()
}

/// Times of the retransmission timeouts.
pub fn rtos(records: &[Record]) -> Vec<Instant> {
    records.iter().filter(|r| matches!(r.event, Event::Rto)).map(|r| r.time).collect()
}

/// One round trip: from the moment `snd_max` was noted until it was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// When the round ended (its marker was acknowledged).
    pub end: Instant,
    /// The window then (bytes), and ssthresh.
    pub cwnd: u32,
    pub ssthresh: u32,
    pub in_recovery: bool,
}

/// The round trips of a connection, as HyStart++ counts them: a round ends when the
/// cumulative ACK reaches `snd_nxt` as it was when the round began, counting what the
/// ACK that began it sent (after a timeout `snd_nxt` is back at `snd_una`, so rounds
/// restart with the retransmissions).
pub fn rounds(records: &[Record]) -> Vec<Round> {
    let mut out = Vec::new();
    let mut marker: Option<u64> = None;
    for (i, r) in records.iter().enumerate() {
        let Event::Sample(s) = r.event else { continue };
        let ended = match marker {
            None => s.snd_nxt > 1,
            Some(m) => s.snd_una >= m,
        };
        if !ended {
            continue;
        }
        if marker.is_some() {
            out.push(Round { end: r.time, cwnd: s.cwnd, ssthresh: s.ssthresh, in_recovery: s.in_recovery });
        }
        // What this ACK sends belongs to the next round.
        let sent_now = records[i + 1..]
            .iter()
            .take_while(|x| x.time == r.time)
            .filter_map(|x| match x.event {
                Event::Sent { seq, len, .. } => Some(seq + u64::from(len)),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        marker = Some(s.snd_nxt.max(sent_now).max(marker.map_or(0, |m| m + 1)));
    }
    out
}

/// One fast-recovery episode, as seen by the sender.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// The ACK that triggered fast retransmit, and the one that ended recovery.
    pub start: Instant,
    pub end: Option<Instant>,
    /// snd_una and snd_max when recovery began: the lost segment and the recovery point.
    pub una: u64,
    pub point: u64,
    /// ssthresh set on entry, bytes.
    pub ssthresh: u32,
    /// Segments of new data that limited transmit (RFC 3042) sent on the duplicate ACKs
    /// before the fast retransmit: outstanding at entry, but not part of the window at the
    /// loss (RFC 5681 §3.2 step 2).
    pub limited_transmit: u32,
    /// Segments of new data sent between the loss detection and the recovery ACK.
    pub new_segments: u32,
    /// Retransmissions from the loss detection to the recovery ACK (time, sequence).
    pub retransmits: Vec<(Instant, u64)>,
    /// Segments sent in response to the recovery ACK itself.
    pub burst_at_end: u32,
    /// Largest number of segments sent at one instant in the round trip after recovery.
    pub max_burst_after: u32,
}

impl Episode {
    /// W: the window (in segments of `mss`) in flight when the loss was signalled by the
    /// first duplicate ACK, without what limited transmit added after it.
    pub fn window(&self, mss: u32) -> f64 {
        (self.point - self.una) as f64 / f64::from(mss) - f64::from(self.limited_transmit)
    }
}

/// The fast-recovery episodes of a trace. `horizon` bounds the "after recovery" look
/// (normally one RTT).
pub fn episodes(records: &[Record], horizon: ackclock::time::Duration) -> Vec<Episode> {
    let mut out: Vec<Episode> = Vec::new();
    let mut open: Option<Episode> = None;
    let mut last_sample: Option<Sample> = None;
    let mut expect_entry_sample = false;
    // The cumulative ACK last seen, whether ACKs repeat it now (a run of duplicates), and
    // the new segments sent in that run: limited transmit.
    let (mut last_ack, mut dup_run, mut limited) = (None, false, 0);
    for (i, r) in records.iter().enumerate() {
        match r.event {
            Event::Ack { ack, .. } => {
                if last_ack == Some(ack) {
                    dup_run = true;
                } else {
                    (dup_run, limited) = (false, 0);
                }
                last_ack = Some(ack);
            }
            Event::FastRetransmit => {
                if let Some(e) = open.take() {
                    out.push(e);
                }
                let s = last_sample.unwrap_or(empty_sample());
                open = Some(Episode {
                    start: r.time,
                    end: None,
                    una: s.snd_una,
                    point: s.snd_max,
                    ssthresh: 0,
                    limited_transmit: if dup_run { limited } else { 0 },
                    new_segments: 0,
                    retransmits: Vec::new(),
                    burst_at_end: 0,
                    max_burst_after: 0,
                });
                expect_entry_sample = true;
            }
            Event::Sample(s) => {
                if expect_entry_sample {
                    expect_entry_sample = false;
                    if let Some(e) = open.as_mut() {
                        // The sample `enter` records: una/max as on entry, ssthresh set.
                        e.una = s.snd_una;
                        e.point = s.snd_max;
                        e.ssthresh = s.ssthresh;
                    }
                }
                last_sample = Some(s);
            }
            Event::Sent { seq, retransmit, .. } => {
                if let Some(e) = open.as_mut() {
                    if retransmit {
                        e.retransmits.push((r.time, seq));
                    } else {
                        e.new_segments += 1;
                    }
                } else if dup_run && !retransmit {
                    limited += 1;
                }
            }
            Event::RecoveryEnd => {
                if let Some(mut e) = open.take() {
                    e.end = Some(r.time);
                    let after = &records[i + 1..];
                    e.burst_at_end = after
                        .iter()
                        .take_while(|x| x.time == r.time)
                        .filter(|x| matches!(x.event, Event::Sent { .. }))
                        .count() as u32;
                    e.max_burst_after = max_burst(after, r.time, r.time + horizon);
                    out.push(e);
                }
            }
            Event::Rto => {
                if let Some(e) = open.take() {
                    out.push(e);
                }
            }
            _ => {}
        }
    }
    out.extend(open);
    out
}

fn empty_sample() -> Sample {
    Sample {
        cwnd: 0,
        ssthresh: 0,
        srtt_us: 0,
        rttvar_us: 0,
        rto_us: 0,
        flight: 0,
        snd_una: 0,
        snd_nxt: 0,
        snd_max: 0,
        snd_wnd: 0,
        rcv_wnd: 0,
        in_recovery: false,
    }
}

/// The largest number of data segments sent at one instant in `[from, to]`.
pub fn max_burst(records: &[Record], from: Instant, to: Instant) -> u32 {
    let mut best = 0;
    let mut cur: Option<(Instant, u32)> = None;
    for r in records.iter().filter(|r| r.time >= from && r.time <= to) {
        if !matches!(r.event, Event::Sent { .. }) {
            continue;
        }
        cur = match cur {
            Some((t, n)) if t == r.time => Some((t, n + 1)),
            _ => Some((r.time, 1)),
        };
        best = best.max(cur.map_or(0, |c| c.1));
    }
    best
}

/// One RTT measurement and the estimator's state after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RttPoint {
    pub time: Instant,
    /// The measured round trip, µs (the segment at the old snd_una, first transmission
    /// only: Karn's rule, and what the echoed timestamp of a delayed ACK measures).
    pub rtt_us: u64,
    pub srtt_us: u64,
    pub rttvar_us: u64,
    pub rto_us: u64,
}

/// RTT samples as the sender's timestamps measure them, with SRTT, RTTVAR and RTO.
pub fn rtt_points(records: &[Record]) -> Vec<RttPoint> {
    use std::collections::HashMap;
    // seq -> (first send time, retransmitted since)
    let mut sends: HashMap<u64, (Instant, bool)> = HashMap::new();
    let mut una = 1u64;
    let mut out = Vec::new();
    let mut pending: Option<(Instant, u64)> = None;
    for r in records {
        match r.event {
            Event::Sent { seq, retransmit, .. } => {
                let e = sends.entry(seq).or_insert((r.time, false));
                if retransmit {
                    e.1 = true;
                }
            }
            Event::Ack { ack, .. } if ack > una => {
                if let Some(&(t, false)) = sends.get(&una) {
                    pending = Some((r.time, r.time.saturating_duration_since(t).as_micros() as u64));
                }
                sends.retain(|&s, _| s >= ack);
                una = ack;
            }
            Event::Sample(s) => {
                if let Some((time, rtt_us)) = pending.take() {
                    out.push(RttPoint { time, rtt_us, srtt_us: s.srtt_us, rttvar_us: s.rttvar_us, rto_us: s.rto_us });
                }
            }
            _ => {}
        }
    }
    out
}

/// Jain's fairness index of `x`: (Σx)² / (n Σx²); 1 when all are equal, 1/n when one
/// takes everything.
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if sq == 0.0 {
        return 1.0;
    }
    sum * sum / (x.len() as f64 * sq)
}

/// Mathis et al.'s model of loss-limited throughput, bytes per second:
/// (MSS / RTT) · C / √p with C = √(3/2).
pub fn mathis(mss: f64, rtt_secs: f64, p: f64) -> f64 {
    mss / rtt_secs * (1.5f64).sqrt() / p.sqrt()
}
