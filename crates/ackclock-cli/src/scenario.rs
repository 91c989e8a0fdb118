//! `ackclock sim`: built-in scenarios on the deterministic simulator. Each writes plots
//! (PNG and SVG) into `--out`, prints a short summary (text, or JSON with `--json`) and
//! keeps a copy of it beside the plots.
//!
//! - `slowstart`: cwnd doubling per round trip on a long fat path.
//! - `fast-recovery`: one loss in a window of W (Jacobson 1990's algebra), as a time-sequence
//!   diagram.
//! - `timeout`: a path outage, the retransmission timeout and the slow start after it.
//! - `sharing`: N flows through a dumbbell converging to a fair share (Jain's index).
//! - `loss-sweep`: goodput against random loss for NewReno, NewReno+SACK and CUBIC,
//!   beside the Mathis et al. model.
//! - `rtt`: the RTO estimator (Jacobson and Karels 1988) on a path whose delay varies.
//!
//! `--pcap DIR` captures the sender's frames (both directions, whole), one file per run:
//! `<scenario>.pcap`, `sharing-flow<i>.pcap` per flow, and for `loss-sweep` one run per
//! algorithm rather than all 63 ([`runs::SWEEP_CAPTURE`]). The summary lists the files.
//! Scenarios that take more than a second (`sharing`, `loss-sweep`) show a progress bar on
//! a terminal, not with `--json`.
//!
//! The simulations are in [`runs`] (library only, shared with the library's scenario
//! tests), the trace analyses in [`analysis`], the plots in `plot`.

// `harness`, `analysis` and `runs` are also compiled into the library's scenario tests
// (`crates/ackclock/tests/scenarios_*.rs`), which use parts the CLI does not.
#[allow(dead_code)]
pub mod analysis;
#[allow(dead_code)]
pub mod harness;
mod plot;
#[allow(dead_code)]
pub mod runs;

use crate::progress::Progress;
use ackclock::tcp::cc::Algorithm;
use ackclock::time::{Duration, Instant};
use analysis::secs;
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// cwnd doubling per round trip (10 Mb/s, RTT 100 ms).
    Slowstart,
    /// One loss in a window of W: fast retransmit and recovery (Jacobson 1990).
    FastRecovery,
    /// A path outage: retransmission timeout, slow start to ssthresh, congestion avoidance.
    Timeout,
    /// N flows sharing a dumbbell's bottleneck; Jain's fairness index.
    Sharing,
    /// Goodput against random loss, beside the Mathis et al. model.
    LossSweep,
    /// The RTT estimator on a path whose delay varies (Jacobson and Karels 1988).
    Rtt,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Slowstart => "slowstart",
            Scenario::FastRecovery => "fast-recovery",
            Scenario::Timeout => "timeout",
            Scenario::Sharing => "sharing",
            Scenario::LossSweep => "loss-sweep",
            Scenario::Rtt => "rtt",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Cc {
    Newreno,
    Cubic,
    CubicHystart,
}

impl Cc {
    fn algorithm(self) -> Algorithm {
        match self {
            Cc::Newreno => Algorithm::NewReno,
            Cc::Cubic => Algorithm::Cubic { hystart: false },
            Cc::CubicHystart => Algorithm::Cubic { hystart: true },
        }
    }
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Which scenario to run.
    #[arg(value_enum)]
    scenario: Scenario,
    /// Directory for the plots and the summary (created if missing).
    #[arg(long, default_value = "sim-out")]
    out: PathBuf,
    /// Seed of every random draw (ISNs, ports, link impairments, jitter).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write pcaps of the sender's frames into this directory: one per run (per flow
    /// for sharing; for loss-sweep, each algorithm's run at RTT 60 ms and 1% loss).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// sharing: number of flows (2 to 8).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=8))]
    flows: u8,
    /// sharing: congestion control of every flow.
    #[arg(long, value_enum, default_value_t = Cc::Newreno)]
    cc: Cc,
    /// sharing: simulated seconds.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// fast-recovery: negotiate SACK (RFC 6675 recovery instead of Reno's window inflation).
    #[arg(long)]
    sack: bool,
}

pub fn run(args: SimArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ackclock sim {}: {e}", args.scenario.name());
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A summary: text for people, JSON for tools.
struct Summary {
    text: String,
    json: Value,
}

/// The capture files of a run: opened on demand (from the sweep's threads too), and
/// remembered for the summary.
struct Pcaps<'a> {
    dir: Option<&'a Path>,
    written: Mutex<Vec<PathBuf>>,
    error: Mutex<Option<String>>,
}

impl Pcaps<'_> {
    /// `<dir>/<stem>.pcap`, or `None` without `--pcap` or if it cannot be created (the
    /// error fails the command once the run is over).
    fn open(&self, stem: &str) -> runs::PcapOut {
        let path = self.dir?.join(format!("{stem}.pcap"));
        match std::fs::File::create(&path) {
            Ok(f) => {
                self.written.lock().unwrap_or_else(|e| e.into_inner()).push(path);
                Some(Box::new(std::io::BufWriter::new(f)))
            }
            Err(e) => {
                self.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(format!("{}: {e}", path.display()));
                None
            }
        }
    }
}

fn run_inner(args: &SimArgs) -> Res<()> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    if let Some(dir) = &args.pcap {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let name = args.scenario.name();
    let pcaps = Pcaps { dir: args.pcap.as_deref(), written: Mutex::new(Vec::new()), error: Mutex::new(None) };
    let pcap = |stem: &str| pcaps.open(stem);
    let wall = std::time::Instant::now();
    let (mut summary, files) = match args.scenario {
        Scenario::Slowstart => {
            let r = runs::slowstart(args.seed, pcap(name));
            (slowstart_summary(&r), plot::render(&args.out, &plot::SlowStartFig(&r))?)
        }
        Scenario::FastRecovery => {
            let r =
                runs::fast_recovery(args.seed, args.sack, Instant::from_millis(runs::FAST_RECOVERY_AT_MS), pcap(name));
            (fast_recovery_summary(&r), plot::render(&args.out, &plot::FastRecoveryFig(&r))?)
        }
        Scenario::Timeout => {
            let r = runs::timeout(args.seed, pcap(name));
            (timeout_summary(&r), plot::render(&args.out, &plot::TimeoutFig(&r))?)
        }
        Scenario::Sharing => {
            let mut progress =
                Progress::new(args.duration, "{bar:40} {pos}/{len} simulated s {elapsed}<{eta}", !args.json);
            let r = runs::sharing(args.seed, args.flows.into(), args.cc.algorithm(), args.duration, &pcap, &mut |t| {
                progress.set(t.total_nanos() / 1_000_000_000)
            });
            progress.finish();
            (sharing_summary(&r), plot::render(&args.out, &plot::SharingFig(&r))?)
        }
        Scenario::LossSweep => {
            let total = runs::SWEEP_RTT_MS.len() * runs::SWEEP_ALGOS.len() * runs::SWEEP_LOSS.len();
            let progress =
                Mutex::new(Progress::new(total as u64, "{bar:40} {pos}/{len} runs {elapsed}<{eta}", !args.json));
            let r = runs::loss_sweep(args.seed, &pcap, &|done| {
                progress.lock().unwrap_or_else(|e| e.into_inner()).set(done as u64)
            });
            progress.into_inner().unwrap_or_else(|e| e.into_inner()).finish();
            let fig = plot::SweepFig { series: &r, rate_bps: runs::SWEEP_RATE, mss: 1448 };
            (sweep_summary(&r), plot::render(&args.out, &fig)?)
        }
        Scenario::Rtt => {
            let r = runs::rtt(args.seed, pcap(name));
            (rtt_summary(&r), plot::render(&args.out, &plot::RttFig(&r))?)
        }
    };
    if let Some(e) = pcaps.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(format!("pcap: {e}").into());
    }
    let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let mut captures = pcaps.written.into_inner().unwrap_or_else(|e| e.into_inner());
    captures.sort();
    let captures: Vec<String> = captures.iter().map(|p| p.display().to_string()).collect();
    let _ = writeln!(summary.text, "plots: {}", files.join(", "));
    if args.scenario == Scenario::LossSweep && !captures.is_empty() {
        let (rtt, p) = runs::SWEEP_CAPTURE;
        let _ = writeln!(summary.text, "pcaps (each algorithm's run at RTT {rtt} ms, {}% loss):", p * 100.0);
        for c in &captures {
            let _ = writeln!(summary.text, "  {c}");
        }
    } else if !captures.is_empty() {
        let _ = writeln!(summary.text, "pcaps: {}", captures.join(", "));
    }
    let _ = writeln!(summary.text, "(seed {}, {:.2} s of wall time)", args.seed, wall.elapsed().as_secs_f64());
    if let Value::Object(m) = &mut summary.json {
        m.insert("scenario".into(), json!(name));
        m.insert("seed".into(), json!(args.seed));
        m.insert("plots".into(), json!(files));
        if args.pcap.is_some() {
            m.insert("pcaps".into(), json!(captures));
            if args.scenario == Scenario::LossSweep {
                let (rtt, p) = runs::SWEEP_CAPTURE;
                m.insert("pcap_run".into(), json!({"rtt_ms": rtt, "loss": p}));
            }
        }
    }
    let json_text = serde_json::to_string_pretty(&summary.json)?;
    write_file(&args.out.join(format!("{name}.txt")), &summary.text)?;
    write_file(&args.out.join(format!("{name}.json")), &json_text)?;
    if args.json {
        println!("{json_text}");
    } else {
        print!("{}", summary.text);
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Res<()> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()).into())
}

fn seg(bytes: u32, mss: u32) -> f64 {
    f64::from(bytes) / f64::from(mss)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

// ---------------------------------------------------------------------------------------

fn slowstart_summary(r: &runs::SlowStart) -> Summary {
    let mut t = String::new();
    let _ = writeln!(t, "slow start: 10 Mb/s, RTT {} ms, initial window 10, NewReno", r.rtt.as_millis());
    let _ =
        writeln!(t, "{:>5} {:>9} {:>10} {:>16} {:>8}", "round", "end (s)", "took (ms)", "cwnd (segments)", "growth");
    let mut rounds = Vec::new();
    let mut prev: Option<(f64, Instant)> = None;
    for (i, x) in r.rounds.iter().enumerate() {
        let cw = seg(x.cwnd, r.mss);
        let ratio = prev.map(|p| cw / p.0);
        let took = prev.map(|p| x.end.saturating_duration_since(p.1).as_secs_f64() * 1e3);
        let growth = ratio.map_or("-".to_string(), |g| format!("×{g:.2}"));
        let took_s = took.map_or("-".to_string(), |d| format!("{d:.0}"));
        let _ = writeln!(t, "{:>5} {:>9.3} {:>10} {:>16.1} {:>8}", i + 1, secs(x.end), took_s, cw, growth);
        rounds.push(json!({
            "round": i + 1, "end_s": round3(secs(x.end)), "took_ms": took.map(round3),
            "cwnd_segments": cw, "growth": ratio.map(round3),
        }));
        prev = Some((cw, x.end));
    }
    let _ = writeln!(t, "(rounds lengthen once cwnd exceeds the path's 86-segment BDP: the queue grows)");
    let rtos = analysis::rtos(&r.trace).len();
    let _ = writeln!(t, "RTOs: {rtos}");
    Summary { text: t, json: json!({"mss": r.mss, "rtt_ms": r.rtt.as_millis() as u64, "rounds": rounds, "rtos": rtos}) }
}

fn fast_recovery_summary(r: &runs::FastRecovery) -> Summary {
    let mut t = String::new();
    let mode = if r.sack { "NewReno+SACK (RFC 6675 pipe)" } else { "NewReno, Reno window inflation (Jacobson 1990)" };
    let _ = writeln!(
        t,
        "fast recovery: 10 Mb/s, RTT 80 ms, queue 66 frames, {mode}; one segment dropped at {:.1} s, in congestion avoidance",
        runs::FAST_RECOVERY_AT_MS as f64 / 1e3
    );
    let Some(e) = &r.episode else {
        let _ = writeln!(t, "no fast recovery happened (RTOs: {})", r.rtos);
        return Summary { text: t, json: json!({"episode": null, "rtos": r.rtos}) };
    };
    let w = e.window(r.mss);
    let dups = duplicate_acks(r, e);
    let end = e.end.unwrap_or(e.start);
    let lt = e.limited_transmit;
    let _ = writeln!(t, "W (window in flight at the loss, the first duplicate ACK): {w:.0} segments");
    let _ = writeln!(t, "limited transmit: {lt} segments (not part of FlightSize, RFC 5681 §3.2)");
    let _ = writeln!(t, "ssthresh: {:.1} segments (W/2)", seg(e.ssthresh, r.mss));
    let full = w - 1.0 + f64::from(lt);
    // With delayed ACKs the segment before the hole may still be unacknowledged: the first
    // segment past the hole then draws a new ACK (for it), not a duplicate, and recovery
    // sends one new segment less than W/2−1.
    let parity = if (dups as f64 - (full - 1.0)).abs() < 0.5 {
        "; one fewer: the first segment past the hole drew the delayed ACK of the one before it"
    } else {
        ""
    };
    let _ = writeln!(t, "duplicate ACKs received: {dups} (W−1 + limited transmit = {full:.0}{parity})");
    let _ = writeln!(
        t,
        "new segments sent during recovery: {} (Jacobson 1990: dup ACKs − W/2 − limited transmit = {:.1}; W/2−1 = {:.1} when all W−1 are duplicates)",
        e.new_segments,
        dups as f64 - w / 2.0 - f64::from(lt),
        w / 2.0 - 1.0
    );
    let _ = writeln!(t, "retransmissions during recovery: {}", e.retransmits.len());
    let _ = writeln!(
        t,
        "recovery lasted {:.1} ms; segments sent on the recovery ACK: {}; largest burst in the next RTT: {}",
        end.saturating_duration_since(e.start).as_secs_f64() * 1e3,
        e.burst_at_end,
        e.max_burst_after
    );
    let _ = writeln!(t, "RTOs: {}", r.rtos);
    Summary {
        text: t,
        json: json!({
            "sack": r.sack,
            "drop_at_s": runs::FAST_RECOVERY_AT_MS as f64 / 1e3,
            "window_segments": w,
            "limited_transmit_segments": lt,
            "ssthresh_segments": seg(e.ssthresh, r.mss),
            "duplicate_acks": dups,
            "new_segments_in_recovery": e.new_segments,
            "expected_new_segments": w / 2.0 - 1.0,
            "retransmissions": e.retransmits.len(),
            "recovery_ms": end.saturating_duration_since(e.start).as_secs_f64() * 1e3,
            "burst_on_recovery_ack": e.burst_at_end,
            "max_burst_next_rtt": e.max_burst_after,
            "rtos": r.rtos,
        }),
    }
}

/// Duplicate ACKs for the lost segment (ACKs of `una` after the first one), up to the
/// recovery ACK.
fn duplicate_acks(r: &runs::FastRecovery, e: &analysis::Episode) -> usize {
    let end = e.end.unwrap_or(Instant::from_nanos(u64::MAX));
    let n = analysis::acks(&r.trace).iter().filter(|a| a.ack == e.una && a.time <= end).count();
    n.saturating_sub(1)
}

fn timeout_summary(r: &runs::Timeout) -> Summary {
    let mut t = String::new();
    let mss = r.mss;
    let _ = writeln!(
        t,
        "timeout: 10 Mb/s, RTT 80 ms, queue 66 frames, NewReno+SACK; every frame lost from {:.1} s to {:.1} s",
        secs(r.outage.0),
        secs(r.outage.1)
    );
    let rtos: Vec<f64> = r.rtos.iter().map(|&x| round3(secs(x))).collect();
    let _ = writeln!(t, "RTOs at (s): {rtos:?}");
    let after = analysis::samples(&r.trace).into_iter().find(|(time, _)| Some(time) == r.rtos.first());
    let mut j = json!({"outage_s": [secs(r.outage.0), secs(r.outage.1)], "rtos_s": rtos});
    if let Some((_, s)) = after {
        let _ = writeln!(
            t,
            "after the RTO: cwnd = {:.0} segment(s), ssthresh = {:.1} segments",
            seg(s.cwnd, mss),
            seg(s.ssthresh, mss)
        );
        j["cwnd_after_rto_segments"] = json!(seg(s.cwnd, mss));
        j["ssthresh_after_rto_segments"] = json!(seg(s.ssthresh, mss));
    }
    let _ = writeln!(t, "{:>5} {:>9} {:>16}  phase", "round", "end (s)", "cwnd (segments)");
    let mut rounds = Vec::new();
    let mut prev = mss;
    for (i, x) in r.rounds_after.iter().take(14).enumerate() {
        let phase = if prev < x.ssthresh { "slow start" } else { "congestion avoidance" };
        prev = x.cwnd;
        let _ = writeln!(t, "{:>5} {:>9.3} {:>16.1}  {phase}", i + 1, secs(x.end), seg(x.cwnd, mss));
        rounds.push(
            json!({"round": i + 1, "end_s": round3(secs(x.end)), "cwnd_segments": seg(x.cwnd, mss), "phase": phase}),
        );
    }
    j["rounds_after_rto"] = json!(rounds);
    Summary { text: t, json: j }
}

fn sharing_summary(r: &runs::Sharing) -> Summary {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "sharing: {} {} flows, 10 Mb/s bottleneck, RTT {} ms, {} s; flow i starts at 2i s",
        r.flows,
        r.algorithm.name(),
        r.rtt.as_millis(),
        r.duration.as_secs()
    );
    let total: f64 = r.last_half_bps.iter().sum();
    for (i, b) in r.last_half_bps.iter().enumerate() {
        let _ =
            writeln!(t, "flow {i}: {:.3} Mb/s over the last half ({:.1}% of the total)", b / 1e6, b / total * 100.0);
    }
    let _ = writeln!(
        t,
        "Jain's fairness index over the last half: {:.4}; bottleneck goodput {:.2} Mb/s",
        r.jain,
        total / 1e6
    );
    Summary {
        text: t,
        json: json!({
            "flows": r.flows,
            "algorithm": r.algorithm.name(),
            "duration_s": r.duration.as_secs(),
            "last_half_mbps": r.last_half_bps.iter().map(|b| round3(b / 1e6)).collect::<Vec<_>>(),
            "jain": r.jain,
        }),
    }
}

fn sweep_summary(r: &[runs::SweepSeries]) -> Summary {
    let mut t = String::new();
    let _ = writeln!(t, "loss sweep: 10 Mb/s, random loss on the data path; goodput in Mb/s (RTOs)");
    let mut rows = Vec::new();
    for &rtt in &runs::SWEEP_RTT_MS {
        let _ = write!(t, "RTT {rtt} ms\n{:>8}", "loss");
        let series: Vec<_> = r.iter().filter(|s| s.rtt == Duration::from_millis(rtt)).collect();
        for s in &series {
            let _ = write!(t, " {:>15}", s.label);
        }
        let _ = writeln!(t, " {:>8}", "Mathis");
        for (k, &p) in runs::SWEEP_LOSS.iter().enumerate() {
            let model = analysis::mathis(1448.0, rtt as f64 / 1e3, p) * 8.0 / 1e6;
            let _ = write!(t, "{:>7}%", p * 100.0);
            let mut row = json!({"rtt_ms": rtt, "loss": p, "mathis_mbps": round3(model)});
            for s in &series {
                let (_, bps, rtos) = s.points[k];
                let _ = write!(t, " {:>10.2} ({:>2})", bps / 1e6, rtos);
                row[s.label] = json!({"mbps": round3(bps / 1e6), "rtos": rtos});
            }
            let _ = writeln!(t, " {model:>8.2}");
            rows.push(row);
        }
    }
    Summary { text: t, json: json!({"rate_mbps": runs::SWEEP_RATE / 1_000_000, "points": rows}) }
}

fn rtt_summary(r: &runs::RttRun) -> Summary {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "rtt: 10 Mb/s, base RTT {} ms, two segments every 20 ms; the data path's delay varies by phase",
        r.base_rtt.as_millis()
    );
    let _ = writeln!(
        t,
        "{:<16} {:>7} {:>9} {:>8} {:>9} {:>9} {:>12}",
        "phase", "samples", "RTT mean", "RTT sd", "SRTT", "RTO mean", "RTO − max R"
    );
    let mut phases = Vec::new();
    for p in &r.phases {
        let pts: Vec<_> = r.points.iter().filter(|x| x.time >= p.from && x.time < p.to).collect();
        let n = pts.len().max(1) as f64;
        let ms = |us: u64| us as f64 / 1e3;
        let mean = pts.iter().map(|x| ms(x.rtt_us)).sum::<f64>() / n;
        let sd = (pts.iter().map(|x| (ms(x.rtt_us) - mean).powi(2)).sum::<f64>() / n).sqrt();
        let srtt = pts.iter().map(|x| ms(x.srtt_us)).sum::<f64>() / n;
        let rto = pts.iter().map(|x| ms(x.rto_us)).sum::<f64>() / n;
        let max_rtt = pts.iter().map(|x| ms(x.rtt_us)).fold(0.0, f64::max);
        let min_rto = pts.iter().map(|x| ms(x.rto_us)).fold(f64::MAX, f64::min);
        let _ = writeln!(
            t,
            "{:<16} {:>7} {:>7.1}ms {:>6.1}ms {:>7.1}ms {:>7.1}ms {:>10.1}ms",
            p.name,
            pts.len(),
            mean,
            sd,
            srtt,
            rto,
            min_rto - max_rtt
        );
        phases.push(json!({
            "phase": p.name, "samples": pts.len(), "rtt_mean_ms": round3(mean), "rtt_sd_ms": round3(sd),
            "srtt_mean_ms": round3(srtt), "rto_mean_ms": round3(rto), "min_rto_minus_max_rtt_ms": round3(min_rto - max_rtt),
        }));
    }
    let above = r.points.windows(2).filter(|w| w[1].rtt_us > w[0].rto_us).count();
    let _ = writeln!(t, "samples longer than the RTO in force before them: {above}; RTOs: {}", r.rtos.len());
    Summary { text: t, json: json!({"phases": phases, "samples_over_rto": above, "rtos": r.rtos.len()}) }
}
