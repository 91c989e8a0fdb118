//! Flows sharing a bottleneck in the simulator (`ackclock sim sharing`; the scenario code
//! is the CLI's, compiled in here with `#[path]`).

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

#[test]
fn two_newreno_flows_share_a_dumbbell_fairly() {
    // The second flow starts 2 s after the first, so the first holds the whole link when
    // it arrives: AIMD has to take the share back.
    let r = runs::sharing(1, 2, Algorithm::NewReno, 60, &|_| None, &mut |_| {});
    println!("last-half goodput {:?} b/s, Jain {:.4}", r.last_half_bps, r.jain);
    assert!(r.jain >= 0.95, "Jain's index {:.4} over the last half", r.jain);
    let total: f64 = r.last_half_bps.iter().sum();
    assert!(total > 0.9 * 10e6 * 1448.0 / 1538.0, "the bottleneck is kept busy: {total:.0} b/s");
    for s in &r.samples {
        assert!(!s.is_empty(), "every flow ran");
    }
}

#[test]
fn jains_index_is_one_for_equal_shares_and_one_over_n_for_a_monopoly() {
    assert!((analysis::jain(&[3.0, 3.0, 3.0]) - 1.0).abs() < 1e-12);
    assert!((analysis::jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    assert!((analysis::jain(&[1.0, 2.0]) - 0.9).abs() < 1e-12);
}
