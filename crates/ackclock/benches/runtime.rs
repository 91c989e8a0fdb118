//! The runtime against its baseline, in one run: one bulk stream between two runtimes over
//! the in-memory pipe (four threads) as a ratio to the same transfer driven by hand on one
//! thread (sans-IO), and window-update messages per MB with synchronous and asynchronous
//! (coalesced, DragonFly BSD commit 96c6eb29) window updates, for 1, 8 and 32 streams.
//!
//! Last, the CPU an idle runtime pair uses while holding 1,000 idle connections for 10 s
//! (getrusage of the whole process): the protocol threads must sleep, not poll.
//!
//! `cargo bench -p ackclock --bench runtime` (MB per stream: first argument, default 256;
//! `--one-only` for the one-stream ratio and its counts alone, `--pairs N` for N more
//! baseline/runtime pairs and their median ratio, `--read-buffer BYTES` for the readers'
//! buffer, default 256 KiB, `--idle-only` for the idle measurement alone).

use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig};
use ackclock::runtime::{Runtime, RuntimeConfig, TcpListener, TcpStream};
use ackclock::time::{Duration, Instant};
use ackclock::{Stack, StackConfig};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn stack(addr: Ipv4Addr) -> Stack {
    let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
    c.pool.buffers = 16 * 1024;
    Stack::new(c, Capabilities::ethernet(1500), Instant::ZERO).unwrap()
}

/// The baseline: both stacks and the pipe on this thread, virtual time, the same copies.
fn sans_io(bytes: u64, read_buffer: usize) -> f64 {
    let (mut da, mut db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let (mut a, mut b) = (stack(A), stack(B));
    let mut now = Instant::ZERO;
    let l = b.tcp_listen(SocketAddrV4::new(B, 5001), 16).unwrap();
    let c = a.tcp_connect(SocketAddrV4::new(B, 5001)).unwrap();
    let chunk = vec![0xa5u8; 256 * 1024];
    let mut buf = vec![0u8; read_buffer];
    let (mut sent, mut got, mut s) = (0u64, 0u64, None);
    let start = std::time::Instant::now();
    // The order of the CLI's loops (serve, fetch): receive, the application's copies, then
    // transmit, so that the ACKs leave after the receiver's copy checked the checksums in it
    // (Jacobson 1993). `poll` (receive and transmit, then the copies) acknowledged first and
    // checked nearly every segment in a pass of its own: 5-10% slower, a flattering baseline.
    while got < bytes {
        a.receive(now, &mut da);
        b.receive(now, &mut db);
        if s.is_none() {
            s = b.tcp_accept(l).ok();
        }
        if sent < bytes {
            let n = (chunk.len() as u64).min(bytes - sent) as usize;
            sent += a.tcp_send(c, &chunk[..n]).unwrap_or(0) as u64;
        }
        if let Some(s) = s {
            got += b.tcp_recv(s, &mut buf).unwrap_or(0) as u64;
        }
        a.transmit(now, &mut da);
        b.transmit(now, &mut db);
        now += Duration::from_micros(10);
    }
    bytes as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
}

/// What one side of a transfer counted, per MB moved.
struct Counts {
    rounds: f64,
    app_rounds: f64,
    polls: f64,
    poll_timeouts: f64,
    sleeps: f64,
    wakeups: f64,
    app_waits: f64,
    lock_contended: f64,
    segs_in: f64,
    segs_out: f64,
    /// Data segments whose checksum was checked in a pass of its own, ahead of the reader's
    /// copy (`csum_verified_early`): an ACK had to go out before the copy.
    early: f64,
    /// `read` calls on the receiver's side, `write` calls on the sender's.
    calls: f64,
}

/// The result of one run of `streams` parallel streams.
struct Run {
    gbits: f64,
    /// Window-update messages per MB received.
    msgs: f64,
    sender: Counts,
    receiver: Counts,
}

fn counts(rt: &Runtime, calls: u64, mb: f64) -> Counts {
    let s = rt.stats();
    let (segs_in, segs_out, early) =
        rt.with_stack(|st| (st.counters().segs_in, st.counters().segs_out, st.tcp().counters().csum_verified_early));
    let per = |x: u64| x as f64 / mb;
    Counts {
        rounds: per(s.rounds),
        app_rounds: per(s.app_rounds),
        polls: per(s.polls),
        poll_timeouts: per(s.poll_timeouts),
        sleeps: per(s.sleeps),
        wakeups: per(s.wakeups),
        app_waits: per(s.app_waits),
        lock_contended: per(s.lock_contended),
        segs_in: per(segs_in),
        segs_out: per(segs_out),
        early: per(early),
        calls: per(calls),
    }
}

/// `streams` parallel bulk streams between two runtimes.
fn runtimes(streams: usize, bytes: u64, sync: bool, read_buffer: usize) -> Run {
    let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let config = RuntimeConfig { sync_window_updates: sync, ..Default::default() };
    let ra = Runtime::with_config(stack(A), da, config).unwrap();
    let rb = Runtime::with_config(stack(B), db, config).unwrap();
    let l = TcpListener::bind(&rb, SocketAddrV4::new(B, 5001)).unwrap();
    let clients: Vec<TcpStream> =
        (0..streams).map(|_| TcpStream::connect(&ra, SocketAddrV4::new(B, 5001)).unwrap()).collect();
    let servers: Vec<TcpStream> = (0..streams).map(|_| l.accept().unwrap().0).collect();
    let writes = AtomicU64::new(0);
    let reads = AtomicU64::new(0);
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for mut c in clients {
            let writes = &writes;
            s.spawn(move || {
                let chunk = vec![0xa5u8; 256 * 1024];
                let (mut sent, mut calls) = (0, 0);
                while sent < bytes {
                    let n = (chunk.len() as u64).min(bytes - sent) as usize;
                    sent += c.write(&chunk[..n]).unwrap() as u64;
                    calls += 1;
                }
                writes.fetch_add(calls, Ordering::Relaxed);
            });
        }
        for mut v in servers {
            let reads = &reads;
            s.spawn(move || {
                let mut buf = vec![0u8; read_buffer];
                let (mut got, mut calls) = (0, 0);
                while got < bytes {
                    got += v.read(&mut buf).unwrap() as u64;
                    calls += 1;
                }
                reads.fetch_add(calls, Ordering::Relaxed);
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let total = bytes * streams as u64;
    let mb = total as f64 / (1 << 20) as f64;
    Run {
        gbits: total as f64 * 8.0 / secs / 1e9,
        msgs: rb.stats().window_update_requests as f64 / mb,
        sender: counts(&ra, writes.load(Ordering::Relaxed), mb),
        receiver: counts(&rb, reads.load(Ordering::Relaxed), mb),
    }
}

/// User plus system CPU time of the whole process so far.
fn cpu_time() -> std::time::Duration {
    // SAFETY: getrusage writes into the struct it is given and reads nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Two runtimes holding `conns` idle connections for `secs`: the share of one core the
/// process used meanwhile.
fn idle(conns: usize, secs: u64) -> f64 {
    let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let ra = Runtime::new(stack(A), da).unwrap();
    let rb = Runtime::new(stack(B), db).unwrap();
    let l = TcpListener::bind(&rb, SocketAddrV4::new(B, 5001)).unwrap();
    let mut held = Vec::with_capacity(2 * conns);
    for _ in 0..conns {
        held.push(TcpStream::connect(&ra, SocketAddrV4::new(B, 5001)).unwrap());
        held.push(l.accept().unwrap().0);
    }
    // Let the handshakes' last ACKs and any delayed ACK settle.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (cpu0, wall0) = (cpu_time(), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(secs));
    let (cpu, wall) = (cpu_time() - cpu0, wall0.elapsed());
    drop(held);
    cpu.as_secs_f64() / wall.as_secs_f64()
}

fn main() {
    if std::env::args().any(|a| a == "--idle-only") {
        let share = idle(1000, 10);
        println!("idle: two runtimes holding 1,000 connections for 10 s used {:.3}% of a core", share * 100.0);
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    // An option's value, and the MB count: the first number that is not an option's value.
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse::<usize>().ok());
    let mb: u64 =
        (1..args.len()).filter(|&i| !args[i - 1].starts_with("--")).find_map(|i| args[i].parse().ok()).unwrap_or(256);
    let read_buffer = value("--read-buffer").unwrap_or(256 * 1024).max(1);
    let bytes = mb << 20;
    let base = sans_io(bytes, read_buffer);
    let one = runtimes(1, bytes, false, read_buffer);
    println!(
        "one stream, {mb} MB, {read_buffer}-byte reads: sans-IO on one thread {base:.2} Gbit/s, two runtimes {:.2} Gbit/s: {:.2}x",
        one.gbits,
        one.gbits / base
    );
    for (side, c) in [("sender", &one.sender), ("receiver", &one.receiver)] {
        println!(
            "  {side:>8} per MB: {:.0} rounds ({:.0} in the application thread), {:.0} sleeps, {:.0} eventfd signals, {:.0} app-thread waits, \
             {:.0} polls ({:.0} timed out), \
             {:.0} contended locks, {:.0} {} calls, {:.0} segments in ({:.0} checked ahead of the copy), {:.0} out",
            c.rounds,
            c.app_rounds,
            c.sleeps,
            c.wakeups,
            c.app_waits,
            c.polls,
            c.poll_timeouts,
            c.lock_contended,
            c.calls,
            if side == "sender" { "write" } else { "read" },
            c.segs_in,
            c.early,
            c.segs_out
        );
    }
    // `--pairs N`: N more alternations of the baseline and the two runtimes, each pair a
    // ratio, and their median (load from other processes moves single runs a lot).
    if let Some(n) = value("--pairs").filter(|&n| n > 0) {
        let mut ratios: Vec<f64> =
            (0..n).map(|_| runtimes(1, bytes, false, read_buffer).gbits / sans_io(bytes, read_buffer)).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "one stream, {n} more pairs of {mb} MB: median {:.2}x (min {:.2}x, max {:.2}x)",
            ratios[n / 2],
            ratios[0],
            ratios[n - 1]
        );
    }
    if args.iter().any(|a| a == "--one-only") {
        return;
    }
    for streams in [1, 8, 32] {
        let per = (bytes / streams as u64).max(1 << 20);
        let (st, at) = (runtimes(streams, per, true, read_buffer), runtimes(streams, per, false, read_buffer));
        println!(
            "{streams:>2} streams: sync {:.2} Gbit/s, {:.1} window-update messages/MB; async {:.2} Gbit/s, {:.1} messages/MB ({:.2}x)",
            st.gbits,
            st.msgs,
            at.gbits,
            at.msgs,
            at.gbits / st.gbits
        );
    }
    let share = idle(1000, 10);
    println!("idle: two runtimes holding 1,000 connections for 10 s used {:.3}% of a core", share * 100.0);
}
