//! `ackclock ttcp`: Van Jacobson's 1988 throughput test (4BSD TCP Ethernet throughput, Jacobson 1988) on the simulator. A
//! chargen-to-discard bulk transfer between two ackclock stacks over a simulated link,
//! with task-to-task and wire throughput against the link's theoretical maximum, and
//! `--sweep` for Jacobson 1988's grid of send x receive socket buffers (1 to 17 packets).
//!
//! Buffers are given in packets (`17p`) or bytes. A packet is the payload of one
//! full-sized segment: the MSS less the TCP options every segment carries, so 1448 bytes on
//! Ethernet with timestamps (the default) and 1460 without (`--no-timestamps`), as the
//! posting's "1460 bytes of user data per packet". A buffer of whole packets holds whole
//! segments, as a 4BSD socket buffer of N mbuf clusters did.

mod model;
mod plot;
mod sweep;
mod transfer;

use crate::progress::Progress;
use ackclock::sim::link::serialization;
use ackclock::sim::{Channel, Duplex, Impairments, LinkConfig, Loss, QueueLimit, Reorder};
use ackclock::tcp::cc::Algorithm;
use ackclock::time::Duration;
use clap::{Args, ValueEnum};
use model::{duration_text, parse_duration, parse_rate, parse_size, queue_text, rate_text, Ceiling, Size};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant as WallClock;
use transfer::{Outcome, Params};

/// Chargen-to-discard bulk transfer between two stacks on a simulated link (Van Jacobson's
/// 1988 4BSD Ethernet throughput test). Prints task-to-task throughput (KB/s, KB = 1024
/// bytes), wire throughput (Mb/s) and the share of the link's theoretical maximum. Needs
/// no privileges: everything runs in virtual time.
///
/// Sizes: bytes, with k/M/G as binary multiples (8M = 8 x 1024 x 1024), or packets with a
/// `p` suffix; a packet is one full segment's payload (1448 bytes with timestamps, 1460
/// without).
#[derive(Args, Debug)]
pub struct TtcpArgs {
    /// Link profile. ethernet10 is one half-duplex 10 Mb/s medium shared by data and ACKs
    /// (classic Ethernet); the others are full duplex. wan takes --rate (default 10M) and
    /// --delay (default 20ms); custom needs --rate.
    #[arg(long, value_enum, default_value_t = LinkProfile::Ethernet10)]
    link: LinkProfile,
    /// Link rate in bits per second (10M, 1G, 1.5e6), overriding the profile's.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// One-way propagation delay (10us, 20ms; a plain number is ms).
    #[arg(long, value_parser = parse_duration)]
    delay: Option<Duration>,
    /// Each end's drop-tail queue: frames (`100` or `100p`) or bytes (`150000b`, `64k`).
    #[arg(long, value_parser = parse_queue)]
    queue: Option<QueueLimit>,
    /// Override the profile's duplex.
    #[arg(long, value_enum)]
    duplex: Option<DuplexArg>,
    /// Bytes to transfer (8M = 8 x 1024 x 1024, as in Jacobson 1988).
    #[arg(long, default_value = "8M", value_parser = parse_size)]
    bytes: Size,
    /// Sender's socket send buffer (`17p` or bytes). Default: 17 packets, or twice the
    /// link's bandwidth-delay product if that is more.
    #[arg(long, value_parser = parse_size, conflicts_with = "sweep")]
    sndbuf: Option<Size>,
    /// Receiver's socket receive buffer (`17p` or bytes); default as --sndbuf.
    #[arg(long, value_parser = parse_size, conflicts_with = "sweep")]
    rcvbuf: Option<Size>,
    /// MSS both stacks advertise (default: MTU - 40 = 1460).
    #[arg(long, value_parser = clap::value_parser!(u16).range(88..))]
    mss: Option<u16>,
    /// Frame loss rate, each direction (0.01 = 1%).
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    loss: f64,
    /// Rate of frames held back by --reorder-delay, each direction.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    reorder: f64,
    /// How late a reordered frame arrives.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    reorder_delay: Duration,
    /// Rate of frames delivered twice, each direction.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    duplicate: f64,
    /// Rate of frames with one bit flipped, each direction.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    corrupt: f64,
    /// Congestion control.
    #[arg(long, value_enum, default_value_t = Cc::Newreno)]
    cc: Cc,
    /// Do not negotiate SACK.
    #[arg(long)]
    no_sack: bool,
    /// Do not negotiate timestamps (a packet is then 1460 bytes, as in Jacobson 1988).
    #[arg(long)]
    no_timestamps: bool,
    /// Seed of the simulation (impairments, ISNs; --sweep's order and per-run seeds).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give up when the transfer has not finished by this simulated time.
    #[arg(long, default_value = "600s", value_parser = parse_duration)]
    time_limit: Duration,
    /// Write the sender's frames (both directions, as tcpdump on the sender) to a pcap file.
    #[arg(long, conflicts_with = "sweep")]
    pcap: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Run Jacobson 1988's grid: every send x receive buffer from 1 to --max-buffer packets,
    /// --repeats times, in random order (seeded).
    #[arg(long)]
    sweep: bool,
    /// Runs per grid cell (Jacobson 1988 did 4).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Largest buffer of the grid, packets.
    #[arg(long, default_value_t = 17, value_parser = clap::value_parser!(u32).range(1..=64))]
    max_buffer: u32,
    /// Run only the equal-buffer cells of the grid (Jacobson 1988's table).
    #[arg(long, requires = "sweep")]
    diagonal: bool,
    /// --sweep: write every run to this CSV file.
    #[arg(long, default_value = "ttcp-sweep.csv")]
    csv: PathBuf,
    /// --sweep: write the heatmap to PREFIX.png and PREFIX.svg.
    #[arg(long, value_name = "PREFIX", default_value = "ttcp-sweep")]
    plot: PathBuf,
    /// --sweep: simulations run in parallel (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LinkProfile {
    Ethernet10,
    Ethernet100,
    Gigabit,
    #[value(name = "10g")]
    TenGig,
    Wan,
    Custom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DuplexArg {
    Half,
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Cc {
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

    fn name(self) -> &'static str {
        match self {
            Cc::Newreno => "newreno",
            Cc::Cubic => "cubic",
            Cc::CubicHystart => "cubic-hystart",
        }
    }
}

fn parse_probability(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim_end_matches('%').parse().map_err(|_| format!("`{s}`: expected a probability"))?;
    let v = if s.ends_with('%') { v / 100.0 } else { v };
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("`{s}`: a probability lies in [0, 1]"))
    }
}

fn parse_queue(s: &str) -> Result<QueueLimit, String> {
    let plain = s.trim().chars().all(|c| c.is_ascii_digit());
    match parse_size(s)? {
        Size::Bytes(0) | Size::Packets(0) => Err("a queue holds at least one frame".into()),
        Size::Bytes(n) if plain => Ok(QueueLimit::Packets(n as usize)),
        Size::Packets(n) => Ok(QueueLimit::Packets(n as usize)),
        Size::Bytes(n) => Ok(QueueLimit::Bytes(n as usize)),
    }
}

/// Everything a run or sweep shares: the link and the TCP settings.
struct Setup {
    profile: LinkProfile,
    link: LinkConfig,
    bytes: u64,
    mss: Option<u16>,
    cc: Cc,
    sack: bool,
    timestamps: bool,
    /// Payload of a full segment: the size of a packet.
    packet: usize,
    ceiling: Ceiling,
}

impl Setup {
    fn new(a: &TtcpArgs) -> Result<Setup, String> {
        let mut link = match a.link {
            LinkProfile::Ethernet10 => LinkConfig::ethernet10(),
            LinkProfile::Ethernet100 => LinkConfig::ethernet100(),
            LinkProfile::Gigabit => LinkConfig::gigabit(),
            LinkProfile::TenGig => LinkConfig::ten_gig(),
            LinkProfile::Wan => {
                LinkConfig::wan(a.rate.unwrap_or(10_000_000), a.delay.unwrap_or(Duration::from_millis(20)))
            }
            LinkProfile::Custom => {
                let rate = a.rate.ok_or("--link custom needs --rate")?;
                let delay = a.delay.unwrap_or(Duration::from_micros(10));
                let queue = a.queue.unwrap_or(QueueLimit::Packets(1000));
                LinkConfig::symmetric(Channel::new(rate, delay, queue), Duplex::Full, 1500)
            }
        };
        if let Some(rate) = a.rate {
            link.a_to_b.rate_bps = rate;
            link.b_to_a.rate_bps = rate;
        }
        if let Some(delay) = a.delay {
            link = link.with_delay(delay);
        }
        if let Some(q) = a.queue {
            link = link.with_queue(q);
        }
        if let Some(d) = a.duplex {
            link.duplex = if d == DuplexArg::Half { Duplex::Half } else { Duplex::Full };
        }
        let reorder = (a.reorder > 0.0).then_some(Reorder { probability: a.reorder, extra_delay: a.reorder_delay });
        let loss = if a.loss > 0.0 { Loss::Bernoulli(a.loss) } else { Loss::None };
        link = link.with_impairments(Impairments { loss, corrupt: a.corrupt, duplicate: a.duplicate, reorder });
        link.validate()?;
        if let Some(mss) = a.mss {
            if mss as usize > link.mtu - 40 {
                return Err(format!("--mss {mss} exceeds the link's MTU {} less 40 bytes of headers", link.mtu));
            }
        }
        let timestamps = !a.no_timestamps;
        let packet = transfer::payload(&link, a.mss, timestamps);
        let bytes = a.bytes.bytes(packet);
        if bytes == 0 {
            return Err("--bytes must be at least 1".into());
        }
        let ceiling = Ceiling::new(&link, packet, timestamps);
        Ok(Setup { profile: a.link, link, bytes, mss: a.mss, cc: a.cc, sack: !a.no_sack, timestamps, packet, ceiling })
    }

    /// Round-trip time of a full segment and its ACK on an idle link.
    fn rtt(&self) -> Duration {
        let ch = &self.link.a_to_b;
        ch.delay
            + self.link.b_to_a.delay
            + serialization(self.ceiling.data_wire, ch.rate_bps)
            + serialization(self.ceiling.ack_wire, self.link.b_to_a.rate_bps)
    }

    /// The default buffer: 17 packets (Jacobson 1988's largest), or twice the bandwidth-delay
    /// product if that is more.
    fn default_buffer(&self) -> Size {
        let bdp = self.link.a_to_b.rate_bps as f64 / 8.0 * self.rtt().as_secs_f64();
        let packets = (2.0 * bdp / self.packet as f64).ceil() as u64;
        Size::Packets(packets.max(17))
    }

    fn params(&self, sndbuf: usize, rcvbuf: usize, seed: u64, time_limit: Duration) -> Params {
        Params {
            link: self.link,
            bytes: self.bytes,
            sndbuf,
            rcvbuf,
            mss: self.mss,
            cc: self.cc.algorithm(),
            sack: self.sack,
            timestamps: self.timestamps,
            seed,
            time_limit,
            pcap: None,
        }
    }

    fn profile_name(&self) -> &'static str {
        match self.profile {
            LinkProfile::Ethernet10 => "ethernet10",
            LinkProfile::Ethernet100 => "ethernet100",
            LinkProfile::Gigabit => "gigabit",
            LinkProfile::TenGig => "10g",
            LinkProfile::Wan => "wan",
            LinkProfile::Custom => "custom",
        }
    }

    fn link_text(&self) -> String {
        let ch = &self.link.a_to_b;
        let duplex = match self.link.duplex {
            Duplex::Half => "half duplex (one medium for data and ACKs)",
            Duplex::Full => "full duplex",
        };
        let i = &ch.impairments;
        let mut imp = Vec::new();
        if i.loss.mean_rate() > 0.0 {
            imp.push(format!("loss {}", pct(i.loss.mean_rate())));
        }
        if let Some(r) = i.reorder {
            imp.push(format!("reorder {} by {}", pct(r.probability), duration_text(r.extra_delay)));
        }
        if i.duplicate > 0.0 {
            imp.push(format!("duplicate {}", pct(i.duplicate)));
        }
        if i.corrupt > 0.0 {
            imp.push(format!("corrupt {}", pct(i.corrupt)));
        }
        let imp = if imp.is_empty() { String::new() } else { format!("; {} each way", imp.join(", ")) };
        format!(
            "{}: {} {duplex}, delay {}, queue {}, MTU {}{imp}",
            self.profile_name(),
            rate_text(ch.rate_bps),
            duration_text(ch.delay),
            queue_text(ch.queue),
            self.link.mtu
        )
    }

    fn tcp_text(&self) -> String {
        let mss = self.mss.map_or(self.link.mtu - 40, usize::from);
        format!(
            "MSS {mss}, {} B payload per segment{}, {}, {}",
            self.packet,
            if self.timestamps { " (12 B of timestamps)" } else { "" },
            if self.sack { "SACK" } else { "no SACK" },
            self.cc.name()
        )
    }

    fn json(&self) -> Value {
        let ch = &self.link.a_to_b;
        let i = &ch.impairments;
        json!({
            "profile": self.profile_name(),
            "rate_bps": ch.rate_bps,
            "delay_ns": ch.delay.as_nanos() as u64,
            "duplex": if self.link.duplex == Duplex::Half { "half" } else { "full" },
            "queue": match ch.queue {
                QueueLimit::Packets(n) => json!({ "frames": n }),
                QueueLimit::Bytes(n) => json!({ "bytes": n }),
            },
            "mtu": self.link.mtu,
            "loss": i.loss.mean_rate(),
            "reorder": i.reorder.map_or(0.0, |r| r.probability),
            "reorder_delay_ns": i.reorder.map_or(0, |r| r.extra_delay.as_nanos() as u64),
            "duplicate": i.duplicate,
            "corrupt": i.corrupt,
        })
    }

    fn ceiling_json(&self) -> Value {
        let c = &self.ceiling;
        json!({
            "bytes_per_s": c.bytes_per_sec,
            "KBps": c.kb_per_sec(),
            "payload": c.payload,
            "data_frame": c.data_frame,
            "data_wire_bytes": c.data_wire,
            "ack_frame": c.ack_frame,
            "ack_wire_bytes": c.ack_wire,
            "half_duplex": c.half_duplex,
            "formula": c.formula(),
            "explanation": c.explanation(),
        })
    }
}

/// The fields of two JSON objects in one.
fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

fn pct(p: f64) -> String {
    format!("{}%", (p * 1e4).round() / 1e2)
}

/// Throughput of one run.
#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    /// Task-to-task, KB/s (1024).
    task_kbps: f64,
    /// Frames on the medium the data crosses (with the ACKs, when they share it), framing
    /// included, Mb/s.
    wire_mbps: f64,
    /// Task-to-task over the ceiling.
    of_max: f64,
}

fn rates(o: &Outcome, bytes: u64, setup: &Setup) -> Rates {
    let secs = o.elapsed.as_secs_f64();
    if secs <= 0.0 {
        return Rates::default();
    }
    let task = o.received.min(bytes) as f64 / secs;
    // The medium the data crosses: on a half-duplex link the ACKs share it.
    let acks = if setup.link.duplex == Duplex::Half { o.busy_acks } else { Duration::ZERO };
    // A frame that started before the last byte was read counts whole; the medium cannot have
    // been busy for longer than the time elapsed.
    let busy = (o.busy_data + acks).as_secs_f64().min(secs);
    Rates {
        task_kbps: task / 1024.0,
        wire_mbps: busy * setup.link.a_to_b.rate_bps as f64 / secs / 1e6,
        of_max: task / setup.ceiling.bytes_per_sec,
    }
}

pub fn run(args: TtcpArgs) -> ExitCode {
    let setup = match Setup::new(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ackclock ttcp: {e}");
            return ExitCode::from(2);
        }
    };
    if args.sweep {
        sweep::run(&args, &setup)
    } else {
        single(&args, &setup)
    }
}

fn single(args: &TtcpArgs, setup: &Setup) -> ExitCode {
    let default = setup.default_buffer();
    let snd = args.sndbuf.unwrap_or(default);
    let rcv = args.rcvbuf.unwrap_or(default);
    let (sndbuf, rcvbuf) = (snd.bytes(setup.packet) as usize, rcv.bytes(setup.packet) as usize);
    if sndbuf == 0 || rcvbuf == 0 {
        eprintln!("ackclock ttcp: buffers must hold at least one byte");
        return ExitCode::from(2);
    }
    let mut params = setup.params(sndbuf, rcvbuf, args.seed, args.time_limit);
    params.pcap = args.pcap.clone();
    let wall = WallClock::now();
    let mut progress =
        Progress::new(setup.bytes, "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}", !args.json);
    let o = transfer::run(&params, &mut |n| progress.set(n));
    progress.finish();
    let wall = wall.elapsed().as_secs_f64();
    let r = rates(&o, setup.bytes, setup);
    let packets = |b: usize| b as f64 / setup.packet as f64;

    if args.json {
        let out = json!({
            "link": setup.json(),
            "bytes": setup.bytes,
            "sndbuf_bytes": sndbuf,
            "rcvbuf_bytes": rcvbuf,
            "sndbuf_packets": packets(sndbuf),
            "rcvbuf_packets": packets(rcvbuf),
            "packet_bytes": setup.packet,
            "mss": o.smss,
            "eff_mss": o.eff_mss,
            "timestamps": o.timestamps,
            "sack": o.sack,
            "cc": setup.cc.name(),
            "seed": args.seed,
            "completed": o.completed,
            "error": o.error,
            "received": o.received,
            "sim_seconds": o.elapsed.as_secs_f64(),
            "sim_end_seconds": o.end.as_secs_f64(),
            "wall_seconds": wall,
            "task_KBps": r.task_kbps,
            "wire_Mbps": r.wire_mbps,
            "max_KBps": setup.ceiling.kb_per_sec(),
            "pct_of_max": 100.0 * r.of_max,
            "ceiling": setup.ceiling_json(),
        });
        let counters = json!({
            "retransmits": o.sender.retransmits,
            "fast_retransmits": o.sender.fast_retransmits,
            "rtos": o.sender.rtos,
            "spurious_retransmits": o.sender.spurious_retransmits,
            "undos": o.sender.undos,
            "dup_acks": o.sender.dup_acks,
            "stack_retransmitted": o.sender_stack.retransmitted,
            "receiver_retransmitted": o.receiver_stack.retransmitted,
            "receiver_bad_checksums": o.receiver_stack.drops_bad_checksum,
            "data_frames": o.data_link.transmitted,
            "ack_frames": o.ack_link.transmitted,
            "lost": o.data_link.lost + o.ack_link.lost,
            "corrupted": o.data_link.corrupted + o.ack_link.corrupted,
            "duplicated": o.data_link.duplicated + o.ack_link.duplicated,
            "reordered": o.data_link.reordered + o.ack_link.reordered,
            "queue_drops": o.data_link.queue_drops + o.ack_link.queue_drops,
            "pcap": args.pcap.as_ref().map(|p| p.display().to_string()),
            "pcap_frames": args.pcap.as_ref().map(|_| o.pcap_frames),
            "steps": o.steps,
        });
        println!("{}", merge(out, counters));
    } else {
        let c = &setup.ceiling;
        let wire_what = if c.half_duplex { "data and ACK frames on the shared medium" } else { "data frames" };
        println!(
            "ackclock ttcp: {} bytes, chargen {} -> discard {}:{}, simulated",
            setup.bytes,
            transfer::SENDER,
            transfer::RECEIVER,
            transfer::DISCARD_PORT
        );
        println!("  link       {}", setup.link_text());
        println!("  tcp        {}", setup.tcp_text());
        let in_packets = |b: usize| {
            let p = packets(b);
            if p.fract() == 0.0 {
                format!("{p:.0} packets")
            } else {
                format!("{p:.2} packets")
            }
        };
        println!("  buffers    send {sndbuf} B ({}), receive {rcvbuf} B ({})", in_packets(sndbuf), in_packets(rcvbuf));
        println!();
        println!("  task-to-task   {:>9.1} KB/s   (KB = 1024 bytes; connect to last byte read)", r.task_kbps);
        println!("  on the wire    {:>9.2} Mb/s   ({wire_what}, with FCS, preamble and gap)", r.wire_mbps);
        println!("  of the max     {:>9.1} %      of {:.1} KB/s", 100.0 * r.of_max, c.kb_per_sec());
        println!("  time           {:>9.3} s      simulated; {:.3} s wall", o.elapsed.as_secs_f64(), wall);
        println!(
            "  retransmitted  {:>9}        segments (fast retransmits {}, RTOs {}; {} recoveries undone as unnecessary)",
            o.sender.retransmits, o.sender.fast_retransmits, o.sender.rtos, o.sender.undos
        );
        println!(
            "  frames         {:>9}        data, {} ACK; lost {}, corrupted {}, duplicated {}, reordered {}, queue drops {}",
            o.data_link.transmitted,
            o.ack_link.transmitted,
            o.data_link.lost + o.ack_link.lost,
            o.data_link.corrupted + o.ack_link.corrupted,
            o.data_link.duplicated + o.ack_link.duplicated,
            o.data_link.reordered + o.ack_link.reordered,
            o.data_link.queue_drops + o.ack_link.queue_drops
        );
        println!();
        println!("  {}", c.formula());
        println!("  ({})", c.explanation());
        if setup.profile == LinkProfile::Ethernet10 {
            println!(
                "  Jacobson 1988: Sun 3/60 to 3/60 reached {} KB/s, {} Mb/s at 12 packets, 91% of VJ's 1,104 KB/s max.",
                sweep::VJ_3_60[11].0,
                sweep::VJ_3_60[11].1
            );
        }
        if let Some(p) = &args.pcap {
            println!("  pcap: {} ({} frames captured at {})", p.display(), o.pcap_frames, transfer::SENDER);
        }
        if let Some(e) = &o.error {
            println!("  error: {e}");
        }
    }
    if o.completed {
        ExitCode::SUCCESS
    } else {
        if !args.json {
            eprintln!("ackclock ttcp: transfer did not complete: {}", o.error.as_deref().unwrap_or("unknown"));
        }
        ExitCode::FAILURE
    }
}
