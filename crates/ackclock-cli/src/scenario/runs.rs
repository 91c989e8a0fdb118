//! The simulations behind `ackclock sim`, without output: each returns what its summary
//! and plots are made from. Library only (through [`harness`](super::harness) and
//! [`analysis`](super::analysis)), so the library's scenario tests include this file and
//! check the very runs the CLI shows.

use super::analysis::{self, Episode, Round, RttPoint};
use super::harness::{tcp_config, Receiver, Sender, Transfer};
use ackclock::sim::{Dumbbell, DumbbellConfig, LinkConfig, Loss, QueueLimit, World};
use ackclock::tcp::cc::Algorithm;
use ackclock::tcp::trace::Record;
use ackclock::tcp::TcpConfig;
use ackclock::time::{Duration, Instant};
use std::io::Write;

/// Where a run writes its pcap, if anywhere.
pub type PcapOut = Option<Box<dyn Write + Send>>;

/// Opens the capture of one of a scenario's runs, given a file stem (`sharing-flow0`);
/// `None` for no capture. Called from the sweep's worker threads.
pub type PcapFiles<'a> = &'a (dyn Fn(&str) -> PcapOut + Sync);

fn start_capture(t: &mut Transfer, pcap: PcapOut) {
    if let Some(out) = pcap {
        t.path.capture(out).expect("pcap header");
    }
}

fn end_capture(t: &mut Transfer) {
    if let Err(e) = t.path.end_capture() {
        eprintln!("pcap: {e}");
    }
}

/// A WAN path: `rate` bits/s each way, one-way `delay`, drop-tail queue of `queue` frames.
pub fn wan(rate: u64, delay_ms: u64, queue: usize) -> LinkConfig {
    LinkConfig::wan(rate, Duration::from_millis(delay_ms)).with_queue(QueueLimit::Packets(queue))
}

// ---------------------------------------------------------------------------------------

/// Slow start on a long fat path.
#[derive(Debug)]
pub struct SlowStart {
    pub trace: Vec<Record>,
    pub rounds: Vec<Round>,
    pub mss: u32,
    /// Base round-trip time of the path.
    pub rtt: Duration,
}

/// 10 Mb/s, 50 ms each way (RTT 100 ms, BDP 125 kB ≈ 86 segments), a queue of 1000 frames
/// and 4 MB buffers: nothing limits slow start for seven rounds.
pub fn slowstart(seed: u64, pcap: PcapOut) -> SlowStart {
    let tcp = tcp_config(4 << 20, Algorithm::NewReno, true);
    let mut t = Transfer::new(seed, wan(10_000_000, 50, 1000), &tcp, None);
    start_capture(&mut t, pcap);
    t.run_until(Instant::from_millis(1200));
    end_capture(&mut t);
    let trace = t.take_trace();
    SlowStart { rounds: analysis::rounds(&trace), mss: t.mss(), trace, rtt: Duration::from_millis(100) }
}

// ---------------------------------------------------------------------------------------

/// One loss in a window: Jacobson 1990's fast retransmit and recovery.
#[derive(Debug)]
pub struct FastRecovery {
    pub trace: Vec<Record>,
    pub mss: u32,
    pub sack: bool,
    /// The episode of the dropped segment.
    pub episode: Option<Episode>,
    pub rtos: usize,
    pub dropped: u64,
}

/// The data frame the scenarios drop to end slow start early (1-based): in the third round
/// of slow start, so that W = 40 segments are in flight when the loss is detected.
pub const FAST_RECOVERY_DROP: u64 = 29;

/// When the fast-recovery scenario drops its second segment, in congestion avoidance.
pub const FAST_RECOVERY_AT_MS: u64 = 4900;

/// A clean 10 Mb/s path, 40 ms each way (BDP 66 segments), a queue of 66 frames, large
/// buffers. Data frame [`FAST_RECOVERY_DROP`] is lost in slow start (a first recovery
/// moves the flow to congestion avoidance at 20 segments); the window then grows by one
/// segment per round trip past the BDP, so the link is busy and the segments go out evenly
/// spaced by the ACK clock, as in Jacobson 1990. The first data frame sent at or after `at` is
/// lost: that episode is the one reported.
pub fn fast_recovery(seed: u64, sack: bool, at: Instant, pcap: PcapOut) -> FastRecovery {
    let tcp = tcp_config(4 << 20, Algorithm::NewReno, sack);
    let mut t = Transfer::new(seed, wan(10_000_000, 40, 66), &tcp, None);
    t.path.shaper.drop_nth = vec![FAST_RECOVERY_DROP];
    t.path.shaper.drop_at = vec![at];
    start_capture(&mut t, pcap);
    t.run_until(at + Duration::from_millis(600));
    end_capture(&mut t);
    let trace = t.take_trace();
    let episode = analysis::episodes(&trace, Duration::from_millis(80)).into_iter().find(|e| e.start >= at);
    FastRecovery {
        rtos: analysis::rtos(&trace).len(),
        mss: t.mss(),
        sack,
        episode,
        dropped: t.path.shaper.dropped,
        trace,
    }
}

// ---------------------------------------------------------------------------------------

/// Throughput of one bulk transfer over `secs` of simulated time (after `warmup`), in
/// bits per second of goodput; the whole run is captured to `pcap`, if given.
pub fn goodput(
    seed: u64,
    config: LinkConfig,
    tcp: &ackclock::tcp::TcpConfig,
    warmup: f64,
    secs: f64,
    pcap: PcapOut,
) -> (f64, Transfer) {
    let tcp = tcp.clone();
    let mut t = Transfer::new(seed, config, &tcp, None);
    t.path.a.set_tracing(false);
    start_capture(&mut t, pcap);
    let w = Instant::from_nanos((warmup * 1e9) as u64);
    t.run_until(w);
    let before = t.receiver.received;
    t.run_until(Instant::from_nanos(((warmup + secs) * 1e9) as u64));
    end_capture(&mut t);
    let bits = (t.receiver.received - before) as f64 * 8.0;
    (bits / secs, t)
}

// ---------------------------------------------------------------------------------------

/// A retransmission timeout and what follows it.
#[derive(Debug)]
pub struct Timeout {
    pub trace: Vec<Record>,
    pub mss: u32,
    /// When the path went dark and came back.
    pub outage: (Instant, Instant),
    pub rtos: Vec<Instant>,
    /// Rounds after the first RTO (slow start, then congestion avoidance).
    pub rounds_after: Vec<Round>,
}

/// When the timeout scenario's outage starts and how long it lasts.
pub const OUTAGE_AT_MS: u64 = 3000;
pub const OUTAGE_MS: u64 = 200;

/// 10 Mb/s, 40 ms each way, a queue of one BDP (66 frames). One early loss (the fast-recovery
/// scenario's) ends slow start at a moderate window; congestion avoidance follows. Then
/// every frame the sender sends in `[3.0 s, 3.2 s)` is lost: the ACKs of what was sent
/// before the outage come back, then nothing does, the retransmission timer fires (after
/// the path is back, so once), cwnd falls to one segment, and the sender slow-starts to
/// half the window it had, then grows by one segment per round trip.
pub fn timeout(seed: u64, pcap: PcapOut) -> Timeout {
    // Delayed ACKs only (one per two segments), as the slow start after the timeout is drawn
    // and checked: quick ACKs (Linux's, after the receiver sat idle through the outage for
    // longer than its RTO) would ACK the first 16 segments one by one.
    let tcp = TcpConfig { quick_acks: false, ..tcp_config(4 << 20, Algorithm::NewReno, true) };
    let mut t = Transfer::new(seed, wan(10_000_000, 40, 66), &tcp, None);
    let outage = (Instant::from_millis(OUTAGE_AT_MS), Instant::from_millis(OUTAGE_AT_MS + OUTAGE_MS));
    t.path.shaper.drop_nth = vec![FAST_RECOVERY_DROP];
    t.path.shaper.outages = vec![outage];
    start_capture(&mut t, pcap);
    t.run_until(Instant::from_secs(6));
    end_capture(&mut t);
    let trace = t.take_trace();
    let rtos = analysis::rtos(&trace);
    let rounds_after = match rtos.first() {
        Some(&at) => {
            let from = trace.iter().position(|r| r.time >= at).unwrap_or(trace.len());
            analysis::rounds(&trace[from..])
        }
        None => Vec::new(),
    };
    Timeout { mss: t.mss(), outage, rtos, rounds_after, trace }
}

// ---------------------------------------------------------------------------------------

/// Flows sharing a bottleneck.
#[derive(Debug)]
pub struct Sharing {
    pub flows: usize,
    pub algorithm: Algorithm,
    /// When each flow started.
    pub starts: Vec<Instant>,
    /// Each flow's state samples (cwnd etc.) over time.
    pub samples: Vec<Vec<(Instant, ackclock::tcp::trace::Sample)>>,
    /// Goodput bins: the width, and bytes each flow received in each bin.
    pub bin: Duration,
    pub bytes: Vec<Vec<u64>>,
    pub duration: Duration,
    /// Jain's index over the last half, from per-flow goodput.
    pub jain: f64,
    /// Per-flow goodput over the last half, bits/s.
    pub last_half_bps: Vec<f64>,
    pub bottleneck_bps: u64,
    pub rtt: Duration,
    pub mss: u32,
}

/// Bottleneck of the sharing scenario: 10 Mb/s, 20 ms each way, a queue of one BDP.
pub const SHARING_RATE: u64 = 10_000_000;

/// `flows` bulk flows (flow i starts 2i seconds in) from the left to the right side of a
/// dumbbell whose bottleneck is 10 Mb/s, 20 ms each way (access links 100 Mb/s, 1 ms),
/// for `secs` seconds. Each sender's frames go to `pcap("sharing-flow<i>")`; `progress`
/// is told the simulated time every half second of it.
pub fn sharing(
    seed: u64,
    flows: usize,
    algorithm: Algorithm,
    secs: u64,
    pcap: PcapFiles,
    progress: &mut dyn FnMut(Instant),
) -> Sharing {
    let tcp = tcp_config(1 << 20, algorithm, true);
    let mut w = World::new(seed);
    let access = LinkConfig::ethernet100().with_delay(Duration::from_millis(1));
    let config = DumbbellConfig {
        pairs: flows,
        sender_access: access,
        receiver_access: access,
        bottleneck: wan(SHARING_RATE, 20, 40),
    };
    let d =
        Dumbbell::build(&mut w, &config, |addr, prefix, seed| super::harness::stack_config(addr, prefix, seed, &tcp));
    let mut captured = Vec::new();
    for (i, &s) in d.senders.iter().enumerate() {
        if let Some(out) = pcap(&format!("sharing-flow{i}")) {
            match w.capture(s, out, ackclock::phy::Resolution::Nanos) {
                Ok(()) => captured.push(s),
                Err(e) => eprintln!("pcap: {e}"),
            }
        }
    }
    let port = |i: usize| super::harness::PORT + i as u16;
    let mut receivers: Vec<Receiver> =
        (0..flows).map(|i| Receiver::listen(w.stack_mut(d.receivers[i]), port(i))).collect();
    for &s in &d.senders {
        w.stack_mut(s).set_tracing(true);
    }
    let starts: Vec<Instant> = (0..flows).map(|i| Instant::from_secs(2 * i as u64)).collect();
    let mut senders: Vec<Option<Sender>> = (0..flows).map(|_| None).collect();
    let bin = Duration::from_millis(500);
    let end = Instant::from_secs(secs);
    let mut next_bin = Instant::ZERO + bin;
    let mut last = vec![0u64; flows];
    let mut bytes: Vec<Vec<u64>> = vec![Vec::new(); flows];
    w.run_while(|w| {
        let now = w.now();
        for i in 0..flows {
            if senders[i].is_none() && now >= starts[i] {
                senders[i] = Some(Sender::connect(
                    w.stack_mut(d.senders[i]),
                    ackclock::sim::Dumbbell::receiver_addr(i),
                    port(i),
                    None,
                    seed ^ i as u64,
                ));
            }
            if let Some(s) = senders[i].as_mut() {
                s.pump(w.stack_mut(d.senders[i]), now);
            }
            receivers[i].pump(w.stack_mut(d.receivers[i]), now);
        }
        while now >= next_bin && next_bin <= end {
            for i in 0..flows {
                bytes[i].push(receivers[i].received - last[i]);
                last[i] = receivers[i].received;
            }
            progress(next_bin);
            next_bin += bin;
        }
        now < end
    });
    let mut samples = Vec::new();
    let mut mss = 1448;
    for (&node, sender) in d.senders.iter().zip(&senders) {
        let stack = w.stack_mut(node);
        let trace = stack.take_trace();
        let s = sender.as_ref().map(|s| (s.tuple(stack), s.conn));
        let records: Vec<Record> = match s {
            Some((tuple, conn)) => {
                if let Ok(info) = stack.tcp_info(conn) {
                    mss = u32::from(info.eff_mss);
                }
                trace.into_iter().filter(|r| r.conn == tuple).collect()
            }
            None => Vec::new(),
        };
        samples.push(analysis::samples(&records));
    }
    for s in captured {
        if let Some(Err(e)) = w.end_capture(s) {
            eprintln!("pcap: {e}");
        }
    }
    // Goodput over the last half of the run, from the bins.
    let bins = bytes.first().map_or(0, Vec::len);
    let half = bins / 2;
    let span = (bins - half) as f64 * bin.as_secs_f64();
    let last_half_bps: Vec<f64> =
        bytes.iter().map(|b| b[half..].iter().sum::<u64>() as f64 * 8.0 / span.max(1e-9)).collect();
    Sharing {
        flows,
        algorithm,
        starts,
        samples,
        bin,
        jain: analysis::jain(&last_half_bps),
        last_half_bps,
        bytes,
        duration: Duration::from_secs(secs),
        bottleneck_bps: SHARING_RATE,
        rtt: Duration::from_millis(44),
        mss,
    }
}

// ---------------------------------------------------------------------------------------

/// One curve of the loss sweep.
#[derive(Debug, Clone)]
pub struct SweepSeries {
    pub label: &'static str,
    pub algorithm: Algorithm,
    pub sack: bool,
    /// Round-trip propagation delay of the path.
    pub rtt: Duration,
    /// (loss probability, goodput in bits/s, RTOs)
    pub points: Vec<(f64, f64, u64)>,
}

/// The sweep: loss rates, path RTTs, and the algorithms compared.
pub const SWEEP_LOSS: [f64; 7] = [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.02, 0.05];
pub const SWEEP_RTT_MS: [u64; 3] = [20, 60, 200];
pub const SWEEP_RATE: u64 = 10_000_000;
pub const SWEEP_ALGOS: [(&str, Algorithm, bool); 3] = [
    ("NewReno", Algorithm::NewReno, false),
    ("NewReno+SACK", Algorithm::NewReno, true),
    ("CUBIC", Algorithm::Cubic { hystart: false }, true),
];

/// The path and TCP settings of one sweep point: 10 Mb/s, `rtt_ms` round trip, a queue of
/// one BDP (at least 20 frames), Bernoulli loss `p` on the data direction only (the ACK
/// path is clean), and a receive window of BDP + queue (Jacobson 1990's "advertised window of
/// two b-d p"), so the flow can fill the pipe but never overflow the queue: every loss is
/// the random one.
pub fn sweep_path(rtt_ms: u64, p: f64, algo: Algorithm, sack: bool) -> (LinkConfig, ackclock::tcp::TcpConfig) {
    let bdp = SWEEP_RATE as f64 * rtt_ms as f64 / 1e3 / 8.0;
    let queue = ((bdp / 1514.0) as usize).max(20);
    let mut config = wan(SWEEP_RATE, rtt_ms / 2, queue);
    config.a_to_b.impairments.loss = Loss::Bernoulli(p);
    let window = bdp as usize + queue * 1448;
    (config, tcp_config(window, algo, sack))
}

/// The sweep point captured for each algorithm (`ackclock sim loss-sweep --pcap`): one
/// run each rather than all 63, at the middle RTT and a loss rate at which every algorithm
/// is recovering most of the time. (RTT in ms, loss probability.)
pub const SWEEP_CAPTURE: (u64, f64) = (60, 0.01);

/// The file stem of an algorithm's captured sweep run: `loss-sweep-newreno-sack-60ms-1pct`.
pub fn sweep_capture_stem(label: &str) -> String {
    let (rtt, p) = SWEEP_CAPTURE;
    format!("loss-sweep-{}-{rtt}ms-{}pct", label.to_lowercase().replace('+', "-"), p * 100.0)
}

/// Goodput against random loss for each algorithm and RTT ([`sweep_path`]), 25 s
/// measured after 5 s of warm-up. Runs spread over the available cores; each is a function of the
/// seed alone, so the result is too. The run at [`SWEEP_CAPTURE`] of each algorithm is
/// captured to `pcap(`[`sweep_capture_stem`]`)`; `done` is told how many runs have
/// finished, after each one.
pub fn loss_sweep(seed: u64, pcap: PcapFiles, done: &(dyn Fn(usize) + Sync)) -> Vec<SweepSeries> {
    let mut jobs = Vec::new();
    for (ri, &rtt) in SWEEP_RTT_MS.iter().enumerate() {
        for (ai, &(_, algo, sack)) in SWEEP_ALGOS.iter().enumerate() {
            for (li, &p) in SWEEP_LOSS.iter().enumerate() {
                jobs.push((ri, ai, li, rtt, algo, sack, p));
            }
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let results = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let finished = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(ri, ai, li, rtt, algo, sack, p)) = jobs.get(j) else { break };
                let (config, tcp) = sweep_path(rtt, p, algo, sack);
                let run_seed = seed.wrapping_mul(1000).wrapping_add(j as u64);
                let capture =
                    if (rtt, p) == SWEEP_CAPTURE { pcap(&sweep_capture_stem(SWEEP_ALGOS[ai].0)) } else { None };
                let (bps, t) = goodput(run_seed, config, &tcp, 5.0, 25.0, capture);
                let rtos = t.path.a.tcp_info(t.sender.conn).map_or(0, |i| i.stats.rtos);
                results.lock().unwrap_or_else(|e| e.into_inner()).push((ri, ai, li, bps, rtos));
                done(finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1);
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|r| (r.0, r.1, r.2));
    let mut out = Vec::new();
    for (ri, &rtt) in SWEEP_RTT_MS.iter().enumerate() {
        for (ai, &(label, algorithm, sack)) in SWEEP_ALGOS.iter().enumerate() {
            let points =
                results.iter().filter(|r| r.0 == ri && r.1 == ai).map(|r| (SWEEP_LOSS[r.2], r.3, r.4)).collect();
            out.push(SweepSeries { label, algorithm, sack, rtt: Duration::from_millis(rtt), points });
        }
    }
    out
}

// ---------------------------------------------------------------------------------------

/// The RTT estimator on a path whose delay changes.
#[derive(Debug)]
pub struct RttRun {
    pub trace: Vec<Record>,
    pub points: Vec<RttPoint>,
    pub phases: Vec<Phase>,
    pub rtos: Vec<Instant>,
    /// Round-trip propagation delay without the added delay.
    pub base_rtt: Duration,
}

/// A phase of the delay profile.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    pub name: &'static str,
    pub from: Instant,
    pub to: Instant,
}

/// Phases of the RTT scenario, seconds.
pub const RTT_PHASES: [(&str, u64, u64); 5] = [
    ("steady", 0, 4),
    ("step +80 ms", 4, 8),
    ("sine 80±60 ms", 8, 14),
    ("jitter 0-120 ms", 14, 20),
    ("steady again", 20, 24),
];

/// Extra one-way delay of the RTT scenario's data path at time `t` (µs): see
/// [`RTT_PHASES`]. The jitter is a hash of the 10 ms slot and the seed.
pub fn rtt_profile(seed: u64, t: Instant) -> Duration {
    let s = t.total_nanos() as f64 / 1e9;
    let ms = if s < 4.0 {
        0.0
    } else if s < 8.0 {
        80.0
    } else if s < 14.0 {
        80.0 + 60.0 * (2.0 * std::f64::consts::PI * (s - 8.0) / 2.0).sin()
    } else if s < 20.0 {
        let slot = t.total_nanos() / 10_000_000;
        let r = ackclock::sim::Rng::derive(seed, slot).next_f64();
        120.0 * r
    } else {
        0.0
    };
    Duration::from_micros((ms * 1000.0) as u64)
}

/// A 10 Mb/s path, 25 ms each way, carrying an application-limited flow (two segments
/// every 20 ms, so no queue builds and the RTT is the path's), while the data path's delay
/// follows [`rtt_profile`].
pub fn rtt(seed: u64, pcap: PcapOut) -> RttRun {
    let tcp = tcp_config(1 << 20, Algorithm::NewReno, true);
    let mut t = Transfer::new(seed, wan(10_000_000, 25, 100), &tcp, None);
    t.sender.pace = Some((Duration::from_millis(20), 2 * 1448));
    t.path.shaper.delay = Some(Box::new(move |now| rtt_profile(seed, now)));
    start_capture(&mut t, pcap);
    let end = RTT_PHASES[RTT_PHASES.len() - 1].2;
    t.run_until(Instant::from_secs(end));
    end_capture(&mut t);
    let trace = t.take_trace();
    let phases = RTT_PHASES
        .iter()
        .map(|&(name, from, to)| Phase { name, from: Instant::from_secs(from), to: Instant::from_secs(to) })
        .collect();
    RttRun {
        points: analysis::rtt_points(&trace),
        rtos: analysis::rtos(&trace),
        phases,
        trace,
        base_rtt: Duration::from_millis(50),
    }
}
