//! `ackclock serve`: discard (9), echo (7), chargen (19) and a small HTTP/1.1 server (80,
//! [`http`]) on the stack, over a Linux TAP or TUN device (`--tap NAME` or `--tun NAME`).
//!
//! serve is built as an embedder builds a server on ackclock: the library's runtime
//! (`ackclock::runtime`) owns the stack and the device, and the services are tokio tasks on
//! the runtime's tokio sockets (`ackclock::runtime::tokio`), one task per connection, on a
//! current-thread tokio runtime beside a task that watches the device
//! (`runtime::tokio::watch_device`): the frames are processed on the thread whose tasks
//! read them, and the protocol thread keeps the timers. (With one worker per core instead,
//! a woken task often ran on the other worker: 0.85-0.93x with offloads in one alternated
//! run, BENCHMARKS.md.) A task holds no buffer while its
//! connection is idle: discard, echo and chargen read through a scratch buffer of the
//! worker thread (`readable`, then `try_read`), and echo keeps only what the send buffer did
//! not take, while the peer does not read (and reads nothing more meanwhile, so the receive
//! window closes). chargen and HTTP bodies are generated, not buffered; an HTTP connection
//! holds an 8 KiB request-head buffer from its first byte.
//!
//! SIGINT/SIGTERM end it: open connections are reset, listeners closed (their unaccepted
//! connections reset), and the device goes away with its descriptor if serve created it.
//!
//! Output: a start-up line on stdout once the services listen, and a summary on exit (to
//! stderr); with `--json`, both are one JSON object per line on stdout instead, with
//! `"event": "ready"` and `"event": "exit"`; the ready object names the device as `"tap"`
//! or `"tun"`. SIGUSR1 prints the counters while serving (`"event": "stats"`).
//!
//! `--threads` (hidden, [`crate::serve_rt`]) serves discard, echo and chargen as blocking
//! code instead, a thread per connection, for measuring the runtime's blocking sockets.

mod http;

use crate::chargen::{self, Chargen};
use crate::link::{
    accept_or_stop, impair_report, install_signals, report_requested, runtime_json, stopping, HeapTrim, Link, LinkArgs,
};
use ackclock::phy::{Device, DeviceStats};
use ackclock::runtime::tokio::{TcpListener, TcpStream};
use ackclock::runtime::Runtime;
use ackclock::Stack;
use clap::Args;
use core::net::Ipv4Addr;
use std::cell::RefCell;
use std::io::{self, ErrorKind, Write};
use std::net::SocketAddrV4;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Serve discard (9), echo (7), chargen (19) and HTTP (80, `GET /bytes/N`) on a TAP or TUN device.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Connections the stack holds at most (default 4096).
    #[arg(long, value_name = "N", value_parser = crate::link::parse_max_connections)]
    pub(crate) max_connections: Option<usize>,
    /// Print the start-up line and the exit summary as JSON objects on stdout, one a line.
    #[arg(long)]
    json: bool,
    /// Serve discard, echo and chargen as blocking code on the runtime, a thread per
    /// connection (for measuring the runtime's blocking sockets; no HTTP).
    #[arg(long, hide = true)]
    threads: bool,
    /// With --threads: who runs the protocol rounds (`RuntimeConfig::tap_rounds`): `proto`
    /// (the protocol thread only), `app` (application threads too) or `watch` (the default:
    /// a blocked application thread watches the device).
    #[arg(long, hide = true, requires = "threads", value_name = "WHO", default_value = "watch",
          value_parser = ["proto", "app", "watch"])]
    runtime_rounds: String,
    /// With --threads: synchronous window updates (`RuntimeConfig::sync_window_updates`: the
    /// reader hands its request to the protocol thread and waits for the reply, as before
    /// DragonFly BSD commit 96c6eb29), for measuring the coalesced messages against them.
    #[arg(long, hide = true, requires = "threads")]
    runtime_sync_window_updates: bool,
}

/// The largest write of generated data (chargen, HTTP bodies), and the scratch buffer that
/// discard, echo and chargen read through: one host-side call moves up to this much.
const CHUNK: usize = 64 * 1024;
/// How long the connections have to report after the stop, before they count as open.
const STOP_WAIT: Duration = Duration::from_secs(2);
/// How long the runtime lingers at exit for the resets and closes to go out.
const LINGER: Duration = Duration::from_millis(500);

#[derive(Clone, Copy)]
enum Service {
    Discard,
    Echo,
    Chargen,
    Http,
}

const SERVICES: [(u16, Service); 4] =
    [(9, Service::Discard), (7, Service::Echo), (19, Service::Chargen), (80, Service::Http)];

/// What every task shares: the generated data, the stop signal and the counts.
struct Served {
    pattern: Vec<u8>,
    chargen: Chargen,
    stop: tokio::sync::watch::Receiver<bool>,
    accepted: AtomicU64,
    /// Connections whose task has not ended.
    open: AtomicU64,
    reset_at_exit: AtomicU64,
    /// Bytes each service moved: discarded, echoed, generated, HTTP responses sent.
    bytes: [AtomicU64; 4],
}

impl Served {
    fn add(&self, svc: Service, n: u64) {
        self.bytes[svc as usize].fetch_add(n, Ordering::Relaxed);
    }
}

thread_local! {
    /// The worker thread's scratch buffer: a connection holds none while it waits.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; CHUNK]);
}

pub fn run(args: ServeArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ackclock serve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), String> {
    install_signals();
    let mut link = Link::open(&args.link)?;
    let stack = link.stack(args.link.addr, false, args.max_connections)?;
    if args.threads {
        return crate::serve_rt::serve(link, stack, args.json, &args.runtime_rounds, args.runtime_sync_window_updates);
    }
    let (kind, tap_mode, netns) = (link.kind(), link.mode(), args.link.netns.as_deref());
    let rt = Runtime::new(stack, link.dev).map_err(|e| format!("runtime: {e}"))?;
    let any = Ipv4Addr::UNSPECIFIED;
    let listeners: Vec<(TcpListener, Service)> = SERVICES
        .into_iter()
        .map(|(port, svc)| {
            TcpListener::bind_with_backlog(&rt, SocketAddrV4::new(any, port), 128)
                .map(|l| (l, svc))
                .map_err(|e| format!("listen {port}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let name = &link.name;
    if args.json {
        let mut ready = serde_json::json!({
            "event": "ready", "mode": tap_mode, "addr": args.link.addr.to_string(),
            "host_addr": args.link.host_addr.map(|h| h.to_string()), "netns": netns,
            "services": { "discard": 9, "echo": 7, "chargen": 19, "http": 80 },
        });
        ready[kind] = name.as_str().into();
        println!("{ready}");
    } else {
        println!(
            "ackclock serve: {kind} {name} ({tap_mode}), stack {}{}{}; discard:9 echo:7 chargen:19 http:80; ready",
            args.link.addr,
            args.link.host_addr.map_or(String::new(), |h| format!(", host {h}")),
            netns.map_or(String::new(), |n| format!(", netns {n}")),
        );
    }
    let _ = io::stdout().flush();

    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let served = Arc::new(Served {
        pattern: http::pattern(),
        chargen: Chargen::new(CHUNK),
        stop,
        accepted: AtomicU64::new(0),
        open: AtomicU64::new(0),
        reset_at_exit: AtomicU64::new(0),
        bytes: Default::default(),
    });
    let tasks =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| format!("tokio: {e}"))?;
    tasks.block_on(async {
        for (l, svc) in listeners {
            tokio::spawn(accept_loop(l, svc, served.clone()));
        }
        // The device's frames are processed on this thread, beside the tasks that read
        // them (`watch_device`).
        if let Some(w) = ackclock::runtime::tokio::watch_device(&rt) {
            tokio::spawn(w);
        }
        let mut heap = HeapTrim::default();
        while !stopping() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if report_requested() {
                let counters = rt.with_stack(|s| counters_json(s));
                print_stats(&counters, rt.device_stats().unwrap_or_default(), args.json);
            }
            heap.after_release(&rt);
        }
        // Stop: the accept loops end (their listeners reset what they had not handed out),
        // and every connection is reset (bounded: a task that does not end within
        // STOP_WAIT is counted as open).
        let _ = stop_tx.send(true);
        let until = tokio::time::Instant::now() + STOP_WAIT;
        while served.open.load(Ordering::Relaxed) != 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    drop(tasks);
    let stats = rt.stats();
    let mut rt = rt;
    // Every socket is reset or closed: the runtime lets the last frames out, then gives the
    // device back for its counters and the capture.
    rt.shutdown_linger(LINGER);
    let tcp = rt.with_stack(|s| counters_json(s));
    link.dev = rt.take_device().ok_or("the runtime did not give the device back")?;
    link.report_errors("ackclock serve");
    let (d, c) = (link.dev.stats(), *link.device().counters());
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (accepted, open) = (load(&served.accepted), load(&served.reset_at_exit) + load(&served.open));
    let impair_stats = args.link.impair.is_some().then(|| link.impair_stats());
    if args.json {
        let impairment = impair_stats.map(|(tx, rx)| {
            let one = |s: ackclock::phy::ImpairStats| {
                serde_json::json!({
                    "passed": s.passed, "lost": s.lost, "reordered": s.reordered,
                    "duplicated": s.duplicated, "overflow": s.overflow,
                })
            };
            serde_json::json!({ "tx": one(tx), "rx": one(rx) })
        });
        let [discard, echo, chargen, http] = served.bytes.each_ref().map(load);
        let exit = serde_json::json!({
            "event": "exit",
            "tcp": tcp,
            "connections": accepted,
            "reset_at_exit": open,
            "bytes": { "discard": discard, "echo": echo, "chargen": chargen, "http": http },
            "rx": { "frames": d.rx_frames, "bytes": d.rx_bytes, "gso": c.rx_gso, "mtu_buffers": c.rx_small, "csum_partial": c.rx_csum_partial },
            "tx": { "frames": d.tx_frames, "bytes": d.tx_bytes, "tso": c.tx_gso },
            "dropped": d.tx_dropped + d.rx_dropped,
            "impairment": impairment,
            "runtime": runtime_json(&stats),
            "error": serde_json::Value::Null,
        });
        println!("{exit}");
    } else {
        if let Some((tx, rx)) = impair_stats {
            eprintln!("ackclock serve: {}", impair_report(tx, rx));
        }
        eprintln!(
            "ackclock serve: {accepted} connections ({open} reset at exit); rx {} frames {} bytes ({} GSO, {} in MTU buffers, {} partial csum), tx {} frames {} bytes ({} TSO), {} dropped",
            d.rx_frames, d.rx_bytes, c.rx_gso, c.rx_small, c.rx_csum_partial, d.tx_frames, d.tx_bytes, c.tx_gso, d.tx_dropped + d.rx_dropped
        );
    }
    // The pcap (--pcap), if any, is complete only once flushed.
    link.finish()
}

/// The stack's counters, as `netstat -s` (SYN cookies, TIME-WAIT, drops by reason).
fn counters_json(stack: &Stack) -> serde_json::Map<String, serde_json::Value> {
    stack.counters().named().map(|(k, v)| (k.to_string(), v.into())).collect()
}

/// The report SIGUSR1 asks for while serving: the stack's counters and the device's frame
/// counts, as the exit summary has them (a JSON object with `"event": "stats"` on stdout with
/// `--json`; otherwise a line on stderr with the counters that are not zero).
fn print_stats(counters: &serde_json::Map<String, serde_json::Value>, d: DeviceStats, json: bool) {
    if json {
        let stats = serde_json::json!({
            "event": "stats",
            "tcp": counters,
            "rx": { "frames": d.rx_frames, "bytes": d.rx_bytes },
            "tx": { "frames": d.tx_frames, "bytes": d.tx_bytes },
        });
        println!("{stats}");
        let _ = io::stdout().flush();
    } else {
        let named: Vec<String> =
            counters.iter().filter(|(_, v)| v.as_u64() > Some(0)).map(|(k, v)| format!("{k}={v}")).collect();
        eprintln!("ackclock serve: rx {} frames, tx {} frames; {}", d.rx_frames, d.tx_frames, named.join(" "));
    }
}

/// Accept on `l` until the runtime stops or serve does; a task per connection.
async fn accept_loop(l: TcpListener, svc: Service, served: Arc<Served>) {
    let mut stop = served.stop.clone();
    while let Some(s) = accept_or_stop(&l, &mut stop).await {
        served.accepted.fetch_add(1, Ordering::Relaxed);
        served.open.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(connection(svc, s, served.clone()));
    }
}

/// One connection: its service until it ends (then a close: FIN after what is queued, or a
/// reset if the peer's data is unread), or until serve stops (then a reset).
async fn connection(svc: Service, s: TcpStream, served: Arc<Served>) {
    let mut stop = served.stop.clone();
    let stopped = tokio::select! {
        _ = service(svc, &s, &served) => false,
        _ = stop.wait_for(|s| *s) => true,
    };
    if stopped {
        let _ = s.set_zero_linger();
        served.reset_at_exit.fetch_add(1, Ordering::Relaxed);
    }
    drop(s);
    served.open.fetch_sub(1, Ordering::Relaxed);
}

/// A service's errors end its connection (the peer reset it, or it timed out): nothing to
/// report, as a server would not.
async fn service(svc: Service, s: &TcpStream, served: &Served) -> io::Result<()> {
    match svc {
        Service::Discard => discard(s, served).await,
        Service::Echo => echo(s, served).await,
        Service::Chargen => generate(s, served).await,
        Service::Http => http::serve(s, served).await,
    }
}

/// Read what is there now through the worker's scratch buffer and drop it; `true` at the
/// end of the stream.
fn drain(s: &TcpStream) -> io::Result<(bool, u64)> {
    SCRATCH.with_borrow_mut(|buf| {
        let mut moved = 0;
        loop {
            match s.try_read(buf) {
                Ok(0) => return Ok((true, moved)),
                Ok(n) => moved += n as u64,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok((false, moved)),
                Err(e) => return Err(e),
            }
        }
    })
}

/// Discard (RFC 863): read and throw away until the end of the stream.
async fn discard(s: &TcpStream, served: &Served) -> io::Result<()> {
    loop {
        s.readable().await?;
        let (eof, moved) = drain(s)?;
        served.add(Service::Discard, moved);
        if eof {
            return Ok(());
        }
    }
}

/// Echo (RFC 862): what is read is sent back at once from the scratch buffer; only what the
/// send buffer did not take is kept, and nothing more is read until it is sent.
async fn echo(s: &TcpStream, served: &Served) -> io::Result<()> {
    let mut pending = Vec::new();
    loop {
        s.readable().await?;
        let eof = SCRATCH.with_borrow_mut(|buf| loop {
            let n = match s.try_read(buf) {
                Ok(0) => return Ok(true),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            };
            let sent = match s.try_write(&buf[..n]) {
                Ok(k) => k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e),
            };
            served.add(Service::Echo, sent as u64);
            if sent < n {
                pending.extend_from_slice(&buf[sent..n]);
                return Ok(false);
            }
        })?;
        if !pending.is_empty() {
            let mut w = s;
            w.write_all(&pending).await?;
            served.add(Service::Echo, pending.len() as u64);
            // Give the memory back: the peer reads again.
            pending = Vec::new();
        }
        if eof {
            return Ok(());
        }
    }
}

/// Chargen (RFC 864): the character stream until the peer goes; what it sends is read and
/// dropped, and its end of stream ends the connection.
async fn generate(s: &TcpStream, served: &Served) -> io::Result<()> {
    let drained = async {
        loop {
            s.readable().await?;
            if drain(s)?.0 {
                return Ok(());
            }
        }
    };
    let sent = async {
        let (mut w, mut pos) = (s, 0u64);
        loop {
            let n = w.write(served.chargen.at(pos, CHUNK)).await?;
            if n == 0 {
                return Err(io::Error::from(ErrorKind::WriteZero));
            }
            pos = (pos + n as u64) % chargen::PERIOD as u64;
            served.add(Service::Chargen, n as u64);
        }
    };
    tokio::select! {
        r = drained => r,
        r = sent => r,
    }
}
