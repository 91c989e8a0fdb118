//! The congestion window and the retransmission timer in the simulator, on the runs
//! `ackclock sim slowstart`, `timeout` and `rtt` plot (the scenario code is the CLI's,
//! compiled in here with `#[path]`).

#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/analysis.rs"]
mod analysis;
#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/runs.rs"]
mod runs;

use ackclock::tcp::trace::Event;

#[test]
fn slow_start_doubles_cwnd_every_round_trip() {
    let r = runs::slowstart(1, None);
    let mss = r.mss;
    let cw: Vec<f64> = r.rounds.iter().map(|x| f64::from(x.cwnd) / f64::from(mss)).collect();
    println!("cwnd per round: {cw:?}");
    assert!(cw.len() >= 5, "at least five rounds of slow start: {cw:?}");
    assert!(analysis::rtos(&r.trace).is_empty());
    assert!(r.rounds.iter().all(|x| !x.in_recovery && x.ssthresh == u32::MAX), "no loss ended slow start");
    for w in cw.windows(2) {
        let g = w[1] / w[0];
        assert!((1.9..=2.1).contains(&g), "cwnd grows ×2 per round, not ×{g:.2}: {cw:?}");
    }
    // And no faster than the ACKs allow: at most two segments per ACK (RFC 3465, L = 2).
    let mut prev: Option<u32> = None;
    for rec in &r.trace {
        if let Event::Sample(s) = rec.event {
            if let Some(p) = prev {
                assert!(s.cwnd <= p + 2 * mss, "cwnd jumped from {p} to {} on one ACK", s.cwnd);
            }
            prev = Some(s.cwnd);
        }
    }
}

#[test]
fn after_a_timeout_cwnd_is_one_segment_then_slow_start_to_ssthresh_then_linear() {
    let r = runs::timeout(1, None);
    let mss = r.mss;
    assert_eq!(r.rtos.len(), 1, "one timeout, after the outage: {:?}", r.rtos);
    let rto = r.rtos[0];
    assert!(rto >= r.outage.1, "the timer fires after the path is back");
    // The state the timeout leaves.
    let at_rto = r
        .trace
        .iter()
        .skip_while(|x| !matches!(x.event, Event::Rto))
        .find_map(|x| match x.event {
            Event::Sample(s) => Some(s),
            _ => None,
        })
        .expect("a sample after the RTO");
    let before = r
        .trace
        .iter()
        .take_while(|x| !matches!(x.event, Event::Rto))
        .filter_map(|x| match x.event {
            Event::Sample(s) => Some(s),
            _ => None,
        })
        .last()
        .expect("a sample before the RTO");
    assert_eq!(at_rto.cwnd, mss, "cwnd = 1 SMSS (RFC 5681's loss window)");
    // The timeout leaves snd.max alone, so the sample's flight is the FlightSize it saw.
    assert_eq!(at_rto.ssthresh, (at_rto.flight / 2).max(2 * mss), "ssthresh = max(FlightSize/2, 2 SMSS)");
    assert!(at_rto.ssthresh < before.cwnd, "below the window that lost");
    assert!(at_rto.rto_us >= 2 * before.rto_us, "the timer backs off");
    let ssthresh = at_rto.ssthresh;
    // Slow start until it reaches ssthresh. RFC 3465 §2.3: after a timeout L = 1 SMSS, so
    // each ACK adds one segment; with delayed ACKs (one per two segments) the window grows
    // by half per round: 1, 2, 3, 5, 8, 12, 18, ...
    let rounds = &r.rounds_after;
    let reach = rounds.iter().position(|x| x.cwnd >= ssthresh).expect("slow start reaches ssthresh");
    let cw: Vec<u32> = rounds.iter().map(|x| x.cwnd / mss).collect();
    println!("after the RTO, ssthresh {} segments, cwnd per round: {cw:?}", ssthresh / mss);
    assert!(reach <= 8, "from 1 to {} segments in log1.5 rounds, not {reach}: {cw:?}", ssthresh / mss);
    let mut prev = mss;
    for x in &rounds[..reach] {
        let segs = prev / mss;
        let (lo, hi) = (prev + (segs / 2).max(1) * mss, prev + segs.div_ceil(2) * mss);
        assert!(x.cwnd >= lo && x.cwnd <= hi, "one segment per ACK, an ACK per two segments: {cw:?}");
        prev = x.cwnd;
    }
    assert_eq!(rounds[reach].cwnd, ssthresh, "slow start stops at ssthresh: {cw:?}");
    // ... then congestion avoidance: one segment per round trip, no loss.
    let ca = &rounds[reach..];
    assert!(ca.len() >= 10);
    for w in ca.windows(2) {
        let d = w[1].cwnd as i64 - w[0].cwnd as i64;
        assert!((0..=mss as i64).contains(&d), "+1 SMSS per RTT at most: {cw:?}");
        assert!(!w[1].in_recovery);
    }
    let grown = (ca[ca.len() - 1].cwnd - ca[0].cwnd) / mss;
    assert!(grown as usize >= (ca.len() - 1) * 8 / 10, "about +1 per round: {cw:?}");
}

#[test]
fn the_rto_estimator_tracks_a_varying_rtt_without_spurious_timeouts() {
    let r = runs::rtt(1, None);
    assert!(r.points.len() > 1000, "{} samples", r.points.len());
    assert!(r.rtos.is_empty(), "no spurious timeout while the delay varies: {:?}", r.rtos);
    // Every sample came back within the RTO in force when it was sent.
    for w in r.points.windows(2) {
        assert!(w[1].rtt_us < w[0].rto_us, "{:?} exceeded the RTO {:?}", w[1], w[0]);
    }
    // SRTT follows a step: 3 s after the delay grows by 80 ms, SRTT is within 5 ms of it.
    let mean = |from: f64, to: f64, f: fn(&analysis::RttPoint) -> u64| {
        let v: Vec<u64> = r.points.iter().filter(|p| (from..to).contains(&analysis::secs(p.time))).map(f).collect();
        v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e3
    };
    let (before, after) = (mean(2.0, 4.0, |p| p.srtt_us), mean(7.0, 8.0, |p| p.srtt_us));
    assert!((after - before - 80.0).abs() < 5.0, "SRTT {before:.1} -> {after:.1} ms");
    // The deviation term grows where the delay varies and decays where it is steady.
    let (steady, jitter) = (mean(2.0, 4.0, |p| p.rttvar_us), mean(15.0, 20.0, |p| p.rttvar_us));
    assert!(steady < 2.0 && jitter > 10.0, "RTTVAR steady {steady:.1} ms, jittery {jitter:.1} ms");
}
