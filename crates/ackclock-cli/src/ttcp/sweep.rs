//! `--sweep`: Jacobson's 1988 grid of send x receive socket buffers, in random order.

use super::transfer::{self, Outcome};
use super::{plot, rates, Rates, Setup, TtcpArgs};
use crate::progress::Progress;
use ackclock::sim::Rng;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant as WallClock;

/// Jacobson 1988's measured table, Sun 3/60 to 3/60 (LANCE to LANCE): task-to-task KB/s and wire
/// Mb/s for equal socket buffers of 1 to 12 packets.
pub const VJ_3_60: [(u32, f64); 12] = [
    (384, 3.4),
    (606, 5.4),
    (690, 6.1),
    (784, 6.9),
    (866, 7.7),
    (904, 8.0),
    (946, 8.4),
    (954, 8.4),
    (974, 8.6),
    (983, 8.7),
    (995, 8.8),
    (1001, 8.9),
];
/// Jacobson 1988's theoretical maximum, KB/s.
pub const VJ_MAX_KBPS: f64 = 1104.0;

/// One run of the grid.
struct Run {
    snd: u32,
    rcv: u32,
    repeat: u32,
    /// Position in the (random) order of execution.
    order: usize,
    seed: u64,
    outcome: Outcome,
    rates: Rates,
    wall: f64,
}

/// The runs of one cell, summarised.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    pub snd: u32,
    pub rcv: u32,
    pub task_kbps: f64,
    pub min_kbps: f64,
    pub max_kbps: f64,
    pub wire_mbps: f64,
    pub of_max: f64,
    pub runs: u32,
    pub completed: u32,
}

pub fn run(args: &TtcpArgs, setup: &Setup) -> ExitCode {
    let max = args.max_buffer;
    // Every run, in grid order; its seed depends on its place in the grid, not on the order.
    let mut plan: Vec<(u32, u32, u32, u64)> = Vec::new();
    for repeat in 0..args.repeats {
        for snd in 1..=max {
            for rcv in 1..=max {
                if args.diagonal && snd != rcv {
                    continue;
                }
                let seed = Rng::derive(args.seed, plan.len() as u64).next_u64();
                plan.push((snd, rcv, repeat, seed));
            }
        }
    }
    // Random order, as Jacobson 1988 ran its 1,156 tests (Fisher-Yates on a seeded stream).
    let mut rng = Rng::derive(args.seed, 0x0_5eed_0000);
    for i in (1..plan.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        plan.swap(i, j);
    }

    let jobs = args
        .jobs
        .map(|j| j as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, plan.len().max(1));
    let wall = WallClock::now();
    let mut progress = Progress::new(plan.len() as u64, "{bar:40} {pos}/{len} runs {elapsed}<{eta}", !args.json);
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel();
    let mut runs: Vec<Option<Run>> = (0..plan.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (plan, next) = (&plan, &next);
            s.spawn(move || loop {
                let order = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(snd, rcv, repeat, seed)) = plan.get(order) else { break };
                let p =
                    setup.params((snd as usize) * setup.packet, (rcv as usize) * setup.packet, seed, args.time_limit);
                let t = WallClock::now();
                let outcome = transfer::run(&p, &mut |_| {});
                let rates = rates(&outcome, setup.bytes, setup);
                let run = Run { snd, rcv, repeat, order, seed, outcome, rates, wall: t.elapsed().as_secs_f64() };
                if tx.send(run).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut done = 0;
        for run in rx {
            let i = run.order;
            runs[i] = Some(run);
            done += 1;
            progress.set(done);
        }
    });
    progress.finish();
    let runs: Vec<Run> = runs.into_iter().flatten().collect();
    let wall = wall.elapsed().as_secs_f64();

    let cells = cells(&runs, max, args.diagonal);
    let mut files = Vec::new();
    let mut failed = false;
    match write_csv(args, setup, &runs) {
        Ok(()) => files.push(args.csv.display().to_string()),
        Err(e) => {
            eprintln!("ackclock ttcp: cannot write {}: {e}", args.csv.display());
            failed = true;
        }
    }
    let title = format!(
        "ackclock ttcp on {}: task-to-task KB/s, {} per run{}",
        setup.profile_name(),
        size_text(setup.bytes),
        if args.repeats > 1 { format!(", mean of {}", args.repeats) } else { String::new() }
    );
    match plot::heatmap(&args.plot, &title, &cells, max, setup.ceiling.kb_per_sec()) {
        Ok(written) => files.extend(written.iter().map(|p| p.display().to_string())),
        Err(e) => {
            eprintln!("ackclock ttcp: cannot render the heatmap: {e}");
            failed = true;
        }
    }
    let incomplete = runs.iter().filter(|r| !r.outcome.completed).count();

    if args.json {
        let equal: Vec<Value> = cells
            .iter()
            .filter(|c| c.snd == c.rcv)
            .map(|c| {
                let vj = VJ_3_60.get(c.snd as usize - 1);
                json!({
                    "packets": c.snd,
                    "task_KBps": c.task_kbps,
                    "wire_Mbps": c.wire_mbps,
                    "pct_of_max": 100.0 * c.of_max,
                    "vj_3_60_KBps": vj.map(|v| v.0),
                    "vj_3_60_Mbps": vj.map(|v| v.1),
                })
            })
            .collect();
        let grid: Vec<Value> = cells
            .iter()
            .map(|c| {
                let runs: Vec<Value> = runs
                    .iter()
                    .filter(|r| r.snd == c.snd && r.rcv == c.rcv)
                    .map(|r| {
                        json!({
                            "repeat": r.repeat,
                            "order": r.order,
                            "seed": r.seed,
                            "completed": r.outcome.completed,
                            "error": r.outcome.error,
                            "task_KBps": r.rates.task_kbps,
                            "wire_Mbps": r.rates.wire_mbps,
                            "sim_seconds": r.outcome.elapsed.as_secs_f64(),
                            "retransmits": r.outcome.sender.retransmits,
                            "fast_retransmits": r.outcome.sender.fast_retransmits,
                            "rtos": r.outcome.sender.rtos,
                        })
                    })
                    .collect();
                json!({
                    "send_packets": c.snd,
                    "recv_packets": c.rcv,
                    "task_KBps": c.task_kbps,
                    "min_KBps": c.min_kbps,
                    "max_KBps": c.max_kbps,
                    "wire_Mbps": c.wire_mbps,
                    "pct_of_max": 100.0 * c.of_max,
                    "completed": c.completed == c.runs,
                    "runs": runs,
                })
            })
            .collect();
        let out = json!({
            "sweep": {
                "max_buffer": max,
                "repeats": args.repeats,
                "diagonal": args.diagonal,
                "runs": runs.len(),
                "incomplete": incomplete,
                "seed": args.seed,
                "bytes": setup.bytes,
                "packet_bytes": setup.packet,
                "cc": setup.cc.name(),
                "sack": setup.sack,
                "timestamps": setup.timestamps,
            },
            "link": setup.json(),
            "max_KBps": setup.ceiling.kb_per_sec(),
            "ceiling": setup.ceiling_json(),
            "vj_max_KBps": VJ_MAX_KBPS,
            "equal": equal,
            "grid": grid,
            "files": files,
            "wall_seconds": wall,
        });
        println!("{out}");
    } else {
        let mut out = String::new();
        let _ = write_text(&mut out, args, setup, &cells, runs.len(), wall);
        let _ = writeln!(out, "wrote {}", files.join(", "));
        if incomplete > 0 {
            let _ = writeln!(out, "{incomplete} runs did not complete (see the CSV's error column)");
        }
        let _ = std::io::stdout().write_all(out.as_bytes());
    }
    if failed || incomplete > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn cells(runs: &[Run], max: u32, diagonal: bool) -> Vec<Cell> {
    let mut cells = Vec::new();
    for snd in 1..=max {
        for rcv in 1..=max {
            if diagonal && snd != rcv {
                continue;
            }
            let of: Vec<&Run> = runs.iter().filter(|r| r.snd == snd && r.rcv == rcv).collect();
            if of.is_empty() {
                continue;
            }
            let n = of.len() as f64;
            let mean = |f: &dyn Fn(&Run) -> f64| of.iter().map(|r| f(r)).sum::<f64>() / n;
            cells.push(Cell {
                snd,
                rcv,
                task_kbps: mean(&|r| r.rates.task_kbps),
                min_kbps: of.iter().map(|r| r.rates.task_kbps).fold(f64::INFINITY, f64::min),
                max_kbps: of.iter().map(|r| r.rates.task_kbps).fold(0.0, f64::max),
                wire_mbps: mean(&|r| r.rates.wire_mbps),
                of_max: mean(&|r| r.rates.of_max),
                runs: of.len() as u32,
                completed: of.iter().filter(|r| r.outcome.completed).count() as u32,
            });
        }
    }
    cells
}

fn size_text(bytes: u64) -> String {
    if bytes % (1 << 20) == 0 {
        format!("{} MB", bytes >> 20)
    } else if bytes % 1024 == 0 {
        format!("{} KB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

fn write_text(
    out: &mut String,
    args: &TtcpArgs,
    setup: &Setup,
    cells: &[Cell],
    runs: usize,
    wall: f64,
) -> std::fmt::Result {
    let max = args.max_buffer;
    writeln!(
        out,
        "ackclock ttcp --sweep: {} per run, send x receive buffer {}1..{max} packets (1 packet = {} B), \
         {runs} runs in random order (seed {}), {:.1} s wall",
        size_text(setup.bytes),
        if args.diagonal { "(equal only) " } else { "" },
        setup.packet,
        args.seed,
        wall
    )?;
    writeln!(out, "link: {}", setup.link_text())?;
    writeln!(out, "tcp:  {}", setup.tcp_text())?;
    writeln!(out, "{}", setup.ceiling.formula())?;
    writeln!(out, "({})", setup.ceiling.explanation())?;
    writeln!(out)?;
    writeln!(out, "Equal send and receive buffers, next to Jacobson 1988's measured 3/60 to 3/60 (LANCE to LANCE):")?;
    let row = |a: &str, b: &str, c: &str, d: &str, e: &str, f: &str, g: &str| {
        format!("{a:>9} | {b:>7} {c:>7} {d:>7} | {e:>7} {f:>7} {g:>7}")
    };
    writeln!(out, "{:>9} | {:<23} | VJ 1988, 3/60 to 3/60", "socket", "ackclock, simulated")?;
    writeln!(out, "{}", row("buffer", "task", "wire", "of max", "task", "wire", "of max"))?;
    let (ours, vjs) = (format!("{:.0}", setup.ceiling.kb_per_sec()), format!("{VJ_MAX_KBPS:.0}"));
    writeln!(out, "{}", row("(packets)", "(KB/s)", "(Mb/s)", &ours, "(KB/s)", "(Mb/s)", &vjs))?;
    for c in cells.iter().filter(|c| c.snd == c.rcv) {
        let (task, wire, of) = match VJ_3_60.get(c.snd as usize - 1) {
            Some(&(k, m)) => (k.to_string(), format!("{m:.1}"), format!("{:.0}%", 100.0 * k as f64 / VJ_MAX_KBPS)),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let line = row(
            &c.snd.to_string(),
            &format!("{:.1}", c.task_kbps),
            &format!("{:.2}", c.wire_mbps),
            &format!("{:.1}%", 100.0 * c.of_max),
            &task,
            &wire,
            &of,
        );
        writeln!(out, "{line}")?;
    }
    if !args.diagonal {
        writeln!(out)?;
        writeln!(out, "Task-to-task KB/s over the grid (rows: send buffer, columns: receive buffer, packets):")?;
        let mut head = String::from("snd\\rcv");
        for rcv in 1..=max {
            let _ = write!(head, "{rcv:>5}");
        }
        writeln!(out, "{head}")?;
        for snd in 1..=max {
            let mut line = format!("{snd:>7}");
            for rcv in 1..=max {
                match cells.iter().find(|c| c.snd == snd && c.rcv == rcv) {
                    Some(c) => {
                        let _ = write!(line, "{:>5.0}", c.task_kbps);
                    }
                    None => line.push_str("    -"),
                }
            }
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

fn write_csv(args: &TtcpArgs, setup: &Setup, runs: &[Run]) -> std::io::Result<()> {
    let mut s = String::from(
        "send_packets,recv_packets,send_bytes,recv_bytes,repeat,order,seed,bytes,completed,sim_seconds,\
         task_KBps,wire_Mbps,pct_of_max,retransmits,fast_retransmits,rtos,data_frames,ack_frames,wall_seconds,error\n",
    );
    let mut sorted: Vec<&Run> = runs.iter().collect();
    sorted.sort_by_key(|r| (r.snd, r.rcv, r.repeat));
    for r in sorted {
        let o = &r.outcome;
        let err = o.error.as_deref().unwrap_or("").replace('"', "\"\"");
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{:.9},{:.3},{:.4},{:.3},{},{},{},{},{},{:.4},\"{err}\"",
            r.snd,
            r.rcv,
            r.snd as usize * setup.packet,
            r.rcv as usize * setup.packet,
            r.repeat,
            r.order,
            r.seed,
            setup.bytes,
            o.completed,
            o.elapsed.as_secs_f64(),
            r.rates.task_kbps,
            r.rates.wire_mbps,
            100.0 * r.rates.of_max,
            o.sender.retransmits,
            o.sender.fast_retransmits,
            o.sender.rtos,
            o.data_link.transmitted,
            o.ack_link.transmitted,
            r.wall,
        );
    }
    std::fs::write(&args.csv, s)
}
