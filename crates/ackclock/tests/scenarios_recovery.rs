//! Loss recovery in the simulator, on the very runs `ackclock sim` plots (the scenario code
//! is the CLI's, compiled in here with `#[path]`): the fast-recovery algebra of Jacobson 1990, and
//! three losses in one window with and without SACK.

#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/analysis.rs"]
mod analysis;
#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/runs.rs"]
mod runs;

use ackclock::tcp::cc::Algorithm;
use ackclock::tcp::trace::Event;
use ackclock::time::{Duration, Instant};
use analysis::Episode;

/// Duplicate ACKs of the lost segment received up to the recovery ACK.
fn dupacks(trace: &[ackclock::tcp::trace::Record], e: &Episode) -> u64 {
    let end = e.end.expect("recovery ended");
    let n = analysis::acks(trace).iter().filter(|a| a.ack == e.una && a.time <= end).count() as u64;
    // The first ACK of `una` is the one that advanced to it.
    n - 1
}

/// Jacobson 1990: with W segments in flight and one lost, W−1 duplicate ACKs come back; the
/// window, pulled to W/2 and inflated by one segment per duplicate, lets out
/// W/2 + (W−1) − W = W/2 − 1 new segments before the recovery ACK, and after it the
/// window is W/2 with about W/2 − 1 in flight: no burst.
///
/// W is the window at the loss. Limited transmit (RFC 3042) sends up to two more segments on
/// the first two duplicate ACKs; RFC 5681 §3.2 step 2 leaves them out of FlightSize, so
/// ssthresh is still W/2, and each of them draws one more duplicate ACK that pays for itself:
/// the count of new segments after the fast retransmit is W/2 − 1 exactly as in Jacobson 1990.
///
/// Two effects make the count differ from W/2 − 1 by up to one, and the exact count is
/// checked against them: ssthresh is FlightSize/2 in bytes, so an odd W leaves half a
/// segment that cannot be sent (the count rounds down); and with delayed ACKs, when the
/// lost segment is the second of an ACK pair, the first out-of-order arrival acknowledges
/// the first of the pair, which is a new ACK, not a duplicate: only W−2 duplicates come.
fn check_seed_000(r: &runs::FastRecovery, what: &str) {
    let e = r.episode.as_ref().unwrap_or_else(|| panic!("{what}: no fast recovery"));
    assert_eq!((e.point - e.una) % u64::from(r.mss), 0, "{what}: whole segments in flight");
    let w = e.window(r.mss) as u64;
    let lt = u64::from(e.limited_transmit);
    let d = dupacks(&r.trace, e);
    let ssthresh = f64::from(e.ssthresh) / f64::from(r.mss);
    println!(
        "{what}: W {w} (+{lt} limited transmit), ssthresh {ssthresh:.1}, dup ACKs {d}, new {} (W/2-1 = {:.1}), burst {} / {}",
        e.new_segments,
        w as f64 / 2.0 - 1.0,
        e.burst_at_end,
        e.max_burst_after
    );
    assert_eq!(r.rtos, 0, "{what}: no retransmission timeout");
    assert_eq!(e.retransmits.len(), 1, "{what}: only the lost segment is sent again");
    assert_eq!(lt, 2, "{what}: limited transmit sent two segments");
    assert!(d == w - 1 + lt || d == w - 2 + lt, "{what}: {d} duplicate ACKs for W = {w}");
    assert_eq!(ssthresh, w as f64 / 2.0, "{what}: ssthresh = W/2 (RFC 5681 §3.2 step 2)");
    let expected = (ssthresh + d as f64 - (w + lt) as f64).floor() as u32;
    assert_eq!(e.new_segments, expected, "{what}: new segments = floor(W/2 + dupacks - (W + limited))");
    let diff = f64::from(e.new_segments) - (w as f64 / 2.0 - 1.0);
    assert!(diff.abs() <= 1.0, "{what}: {} new segments, W/2-1 = {:.1}", e.new_segments, w as f64 / 2.0 - 1.0);
    if w % 2 == 0 && d == w - 1 + lt {
        assert_eq!(f64::from(e.new_segments), w as f64 / 2.0 - 1.0, "{what}: exactly W/2 - 1");
    }
    assert!(e.burst_at_end <= 2, "{what}: {} segments sent on the recovery ACK", e.burst_at_end);
    assert!(e.max_burst_after <= 2, "{what}: a burst of {} after recovery", e.max_burst_after);
}

#[test]
fn fast_recovery_scenario_matches_seed_000() {
    let at = Instant::from_millis(runs::FAST_RECOVERY_AT_MS);
    let r = runs::fast_recovery(1, false, at, None);
    check_seed_000(&r, "the CLI's scenario");
    let e = r.episode.as_ref().unwrap();
    // The numbers `ackclock sim fast-recovery` prints: W = 72 at the loss (74 outstanding
    // at the fast retransmit, two of them sent by limited transmit), ssthresh 36. The lost
    // segment is the second of a delayed-ACK pair, so W − 2 + 2 duplicate ACKs come back
    // and 34 = W/2 − 2 new segments go out.
    assert_eq!(e.window(r.mss), 72.0);
    assert_eq!((e.limited_transmit, dupacks(&r.trace, e)), (2, 72));
    assert_eq!(e.ssthresh, 36 * r.mss);
    assert_eq!(e.new_segments, 34);
}

#[test]
fn fast_recovery_algebra_holds_for_odd_and_even_windows() {
    // Losses at different points of congestion avoidance: W from 61 to 73, odd and even,
    // the lost segment first or second of an ACK pair.
    let mut parities = [false; 2];
    for ms in (4000..5100).step_by(100) {
        let r = runs::fast_recovery(1, false, Instant::from_millis(ms), None);
        let e = r.episode.as_ref().unwrap();
        parities[(e.window(r.mss) as u64 % 2) as usize] = true;
        check_seed_000(&r, &format!("loss at {ms} ms"));
    }
    assert_eq!(parities, [true, true], "both parities of W were tried");
}

#[test]
fn fast_recovery_in_slow_start_with_even_window_is_exactly_w_over_2_minus_1() {
    // The scenarios' first loss: data frame 29, in the third round of slow start.
    let r = runs::fast_recovery(1, false, Instant::from_secs(100), None);
    let e = analysis::episodes(&r.trace, Duration::from_millis(80)).into_iter().next().unwrap();
    let w = e.window(r.mss);
    // W = 38 at the loss; limited transmit then sent two more, which neither ssthresh
    // (RFC 5681 §3.2 step 2) nor the count of W counts.
    assert_eq!(w, 38.0);
    assert_eq!((e.limited_transmit, dupacks(&r.trace, &e)), (2, 38 - 1 + 2));
    assert_eq!(e.ssthresh, 19 * r.mss, "W/2");
    assert_eq!(e.new_segments, 18, "W/2 - 1");
    assert!(e.burst_at_end <= 2 && e.max_burst_after <= 2);
    assert_eq!(r.rtos, 0);
}

#[test]
fn fast_recovery_with_sack_sends_the_same_and_no_burst() {
    let at = Instant::from_millis(runs::FAST_RECOVERY_AT_MS);
    let r = runs::fast_recovery(1, true, at, None);
    let e = r.episode.as_ref().expect("recovery");
    let w = e.window(r.mss);
    assert_eq!(r.rtos, 0);
    assert!((f64::from(e.new_segments) - (w / 2.0 - 1.0)).abs() <= 1.0, "{e:?}");
    assert!(e.burst_at_end <= 2 && e.max_burst_after <= 2, "{e:?}");
}

/// Three segments lost in one window of congestion avoidance (W about 75, RTT 80 ms):
/// the recovery episode, its retransmissions, and the smoothed RTT when it began.
fn three_losses(sack: bool) -> (Episode, Duration, usize) {
    let tcp = harness::tcp_config(4 << 20, Algorithm::NewReno, sack);
    let mut t = harness::Transfer::new(3, runs::wan(10_000_000, 40, 66), &tcp, None);
    let at = Instant::from_millis(runs::FAST_RECOVERY_AT_MS);
    t.path.shaper.drop_nth = vec![runs::FAST_RECOVERY_DROP];
    // About 8 segments apart, all within one window.
    t.path.shaper.drop_at = vec![at, at + Duration::from_millis(10), at + Duration::from_millis(20)];
    t.run_until(at + Duration::from_secs(1));
    let trace = t.take_trace();
    assert_eq!(t.path.shaper.dropped, 4);
    let e = analysis::episodes(&trace, Duration::from_millis(80))
        .into_iter()
        .find(|e| e.start >= at)
        .expect("a recovery after the drops");
    let srtt = trace
        .iter()
        .rev()
        .filter(|r| r.time <= e.start)
        .find_map(|r| match r.event {
            Event::Sample(s) if s.srtt_us > 0 => Some(Duration::from_micros(s.srtt_us)),
            _ => None,
        })
        .unwrap();
    (e, srtt, analysis::rtos(&trace).len())
}

#[test]
fn three_losses_with_sack_are_repaired_within_one_round_trip() {
    let (e, srtt, rtos) = three_losses(true);
    println!("SACK: retransmissions {:?}, SRTT {srtt:?}", e.retransmits);
    assert_eq!(rtos, 0, "no timeout");
    assert!(e.end.is_some(), "recovery completed");
    assert_eq!(e.retransmits.len(), 3, "the three holes, once each: {:?}", e.retransmits);
    let first = e.retransmits[0].0;
    let last = e.retransmits[2].0;
    assert!(
        last.saturating_duration_since(first) <= srtt.mul_f64(1.5),
        "all three sent within 1.5 RTT of the first: {:?}",
        e.retransmits
    );
    // And the whole episode takes about one round trip, not three.
    let took = e.end.unwrap().saturating_duration_since(e.start);
    assert!(took < srtt * 2, "recovery took {took:?}");
}

#[test]
fn three_losses_without_sack_are_repaired_one_per_round_trip() {
    let (e, srtt, rtos) = three_losses(false);
    println!("NewReno: retransmissions {:?}, SRTT {srtt:?}", e.retransmits);
    assert_eq!(rtos, 0, "no timeout: partial ACKs keep the recovery going (RFC 6582)");
    assert!(e.end.is_some(), "recovery completed");
    assert_eq!(e.retransmits.len(), 3, "one retransmission per hole: {:?}", e.retransmits);
    for w in e.retransmits.windows(2) {
        let gap = w[1].0.saturating_duration_since(w[0].0);
        assert!(
            gap >= srtt.mul_f64(0.7) && gap <= srtt.mul_f64(1.6),
            "the next hole is found one round trip later (partial ACK): gap {gap:?}, SRTT {srtt:?}"
        );
        assert!(w[1].1 > w[0].1, "holes in order");
    }
}
