//! Robustness and reproducibility in the simulator, on the CLI's scenario harness
//! (compiled in here with `#[path]`): a byte-exact transfer through every impairment at
//! once, runs that replay from their seed, and a timeout inside fast recovery.

#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/analysis.rs"]
mod analysis;
#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/runs.rs"]
mod runs;

use ackclock::sim::{Impairments, LinkConfig, Loss, Reorder, Side};
use ackclock::tcp::cc::Algorithm;
use ackclock::tcp::trace::{Event, Record};
use ackclock::time::{Duration, Instant};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};

#[test]
fn a_transfer_survives_loss_reordering_duplication_and_corruption_byte_exact() {
    let imp = Impairments {
        loss: Loss::Bernoulli(0.05),
        corrupt: 0.001,
        duplicate: 0.01,
        reorder: Some(Reorder { probability: 0.05, extra_delay: Duration::from_millis(4) }),
    };
    // Both directions: data and ACKs alike.
    let config = LinkConfig::wan(20_000_000, Duration::from_millis(10)).with_impairments(imp);
    let len: u64 = 3 << 20;
    let tcp = harness::tcp_config(1 << 20, Algorithm::NewReno, true);
    let mut t = harness::Transfer::new(11, config, &tcp, Some(len));
    let hasher = Arc::new(Mutex::new(Sha256::new()));
    let h = Arc::clone(&hasher);
    t.receiver.sink = Some(Box::new(move |data: &[u8]| h.lock().unwrap().update(data)));
    t.run_until(Instant::from_secs(600));

    let mut expected = Sha256::new();
    harness::Pattern::new(11).for_each(len, |chunk| expected.update(chunk));
    let got = hasher.lock().unwrap().clone().finalize();
    assert!(t.receiver.eof_at.is_some(), "end of stream reached by {:?}", t.path.now);
    assert_eq!(t.receiver.received, len);
    assert_eq!(got, expected.finalize(), "SHA-256 of the received stream");
    let (data, acks) = (*t.path.link.stats(Side::A), *t.path.link.stats(Side::B));
    println!("done at {:?}; data direction {data:?}; ACK direction {acks:?}", t.receiver.eof_at.unwrap());
    for s in [data, acks] {
        assert!(s.lost > 0 && s.reordered > 0 && s.duplicated > 0, "{s:?}");
    }
    assert!(data.corrupted + acks.corrupted > 0, "something was corrupted");
    assert_eq!(t.path.stalls, 0);
}

/// A lossy, reordering transfer; the sender's trace.
fn lossy_run(seed: u64) -> (Vec<Record>, u64) {
    let imp = Impairments {
        loss: Loss::Bernoulli(0.02),
        corrupt: 0.0,
        duplicate: 0.01,
        reorder: Some(Reorder { probability: 0.02, extra_delay: Duration::from_millis(3) }),
    };
    let config = LinkConfig::wan(10_000_000, Duration::from_millis(10)).with_impairments(imp);
    let tcp = harness::tcp_config(512 << 10, Algorithm::Cubic { hystart: true }, true);
    let mut t = harness::Transfer::new(seed, config, &tcp, Some(1 << 20));
    t.run_until(Instant::from_secs(120));
    assert!(t.receiver.eof_at.is_some());
    (t.take_trace(), t.path.steps)
}

#[test]
fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
    let (a, steps_a) = lossy_run(7);
    let (b, steps_b) = lossy_run(7);
    let (c, _) = lossy_run(8);
    assert!(a.len() > 1500, "a real trace: {} records", a.len());
    assert_eq!(a.len(), b.len());
    if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
        panic!("traces differ at record {i}: {:?} vs {:?}", a[i], b[i]);
    }
    assert_eq!(steps_a, steps_b);
    assert_ne!(a, c, "seed 8 is another run");
    let rexmit = |t: &[Record]| t.iter().filter(|r| matches!(r.event, Event::Sent { retransmit: true, .. })).count();
    println!("retransmissions: seed 7 {}, seed 8 {}", rexmit(&a), rexmit(&c));
}

/// A timeout during fast recovery (the fast retransmission is lost too) must not undo the
/// window reduction of that congestion event.
#[test]
fn a_timeout_during_recovery_does_not_raise_ssthresh() {
    for sack in [false, true] {
        let at = Instant::from_millis(runs::FAST_RECOVERY_AT_MS);
        // First run: when is the fast retransmission sent?
        let first = runs::fast_recovery(1, sack, at, None);
        let start = first.episode.as_ref().expect("recovery").start;
        // Second run, identical but for losing that retransmission as well.
        let tcp = harness::tcp_config(4 << 20, Algorithm::NewReno, sack);
        let mut t = harness::Transfer::new(1, runs::wan(10_000_000, 40, 66), &tcp, None);
        t.path.shaper.drop_nth = vec![runs::FAST_RECOVERY_DROP];
        t.path.shaper.drop_at = vec![at];
        t.path.shaper.outages = vec![(start, start + Duration::from_nanos(1))];
        t.run_until(at + Duration::from_secs(2));
        let trace = t.take_trace();
        let samples = analysis::samples(&trace);
        let entry = samples.iter().find(|(time, s)| *time >= start && s.in_recovery).expect("recovery").1;
        let rto = *analysis::rtos(&trace).first().expect("the lost retransmission needs a timeout");
        let after = samples.iter().find(|(time, _)| *time >= rto).expect("sample").1;
        println!(
            "sack {sack}: ssthresh {} segments at recovery, {} after the RTO (flight {})",
            entry.ssthresh / 1448,
            after.ssthresh / 1448,
            after.flight / 1448
        );
        assert_eq!(after.cwnd, 1448);
        assert!(
            after.ssthresh <= entry.ssthresh,
            "sack {sack}: the RTO raised ssthresh from {} to {} segments",
            entry.ssthresh / 1448,
            after.ssthresh / 1448
        );
    }
}
