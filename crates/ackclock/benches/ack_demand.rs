//! The sender's service demand with ACK aggregation off and on (Gallatin 2008's table for
//! the Myri10GE `inet_lro` patch): CPU microseconds of the sending stack per KB sent, against
//! a receiver that ACKs every second segment and one that ACKs about every eighth.
//!
//! Two stacks over the in-memory pipe, in one thread. The receiver takes `k` frames per
//! receive call (2 or 8) and so ACKs every `k`th segment; it runs rounds until its pipe is
//! empty, so the sender finds all those ACKs waiting in its next batch (up to 64 frames), as
//! a sender behind a fast link does. Only the sender's calls (`receive`, `tcp_send`,
//! `transmit`) are timed, by the thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`, what
//! getrusage sums per thread), read once per sender round. The bytes are checked at the
//! receiver. Each configuration runs `--runs` times, interleaved, and the median is printed,
//! with the ratio on/off of the same run set. `sender_round` is out of line, for callgrind:
//!
//! ```sh
//! cargo bench -p ackclock --bench ack_demand                       # the table
//! valgrind --tool=callgrind --toggle-collect='*sender_round*' \
//!     target/release/deps/ack_demand-<hash> --bytes 64M --only 2:on  # instructions per KB
//! ```

use ackclock::buf::PoolConfig;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig, PipeEnd};
use ackclock::tcp::Aggregation;
use ackclock::time::{Duration, Instant};
use ackclock::{Shutdown, Stack, StackConfig, TcpHandle};
use std::net::{Ipv4Addr, SocketAddrV4};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn config(addr: Ipv4Addr, seed: u64, batch: usize) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
    c.seed = seed;
    c.batch = batch;
    c.pool = PoolConfig { buffers: 2048, ..Default::default() };
    c.tcp.recv_buffer = 256 * 1024;
    c.tcp.send_buffer = 256 * 1024;
    c
}

fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

struct Sender<'a> {
    a: &'a mut Stack,
    da: &'a mut PipeEnd,
    c: TcpHandle,
    src: &'a [u8],
    sent: usize,
    len: usize,
    shut: bool,
}

/// One round of the sender: its ACKs, what the application writes, its output.
#[inline(never)]
fn sender_round(s: &mut Sender, now: Instant) {
    s.a.receive(now, s.da);
    while s.sent < s.len {
        let off = s.sent % (s.src.len() / 2);
        let n = (s.len - s.sent).min(65521);
        match s.a.tcp_send(s.c, &s.src[off..off + n]) {
            Ok(0) | Err(_) => break,
            Ok(k) => s.sent += k,
        }
    }
    if s.sent == s.len && !s.shut {
        let _ = s.a.tcp_shutdown(s.c, Shutdown::Write);
        s.shut = true;
    }
    s.a.transmit(now, s.da);
}

struct Out {
    sender_ns: u64,
    acks_in: u64,
    merged: u64,
}

fn run(len: usize, every: usize, on: bool) -> Out {
    let now0 = Instant::from_secs(1);
    let caps = Capabilities::ethernet(1500);
    let mut a = Stack::new(config(A, 1, 64), caps, now0).unwrap();
    let mut b = Stack::new(config(B, 2, every), caps, now0).unwrap();
    a.set_aggregation(if on { Aggregation::ON } else { Aggregation::OFF });
    let (mut da, mut db) = pipe(PipeConfig { depth: 8192, ..Default::default() });
    let l = b.tcp_listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let c = a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    // A pattern of period 65521 (prime) bytes, read at any offset below its length.
    let src: Vec<u8> = (0..2 * 65521u64).map(|i| (((i % 65521) * 131) >> 7) as u8).collect();
    let mut s = Sender { a: &mut a, da: &mut da, c, src: &src, sent: 0, len, shut: false };
    let mut now = now0;
    let mut server = None;
    let mut got = 0usize;
    let mut buf = vec![0u8; 65536];
    let mut ns = 0;
    let end = now0 + Duration::from_secs(3600);
    'outer: while now < end {
        let t0 = thread_cpu_ns();
        sender_round(&mut s, now);
        ns += thread_cpu_ns() - t0;
        loop {
            now += Duration::from_micros(1);
            b.receive(now, &mut db);
            server = server.or_else(|| b.tcp_accept(l).ok());
            if let Some(h) = server {
                loop {
                    match b.tcp_recv(h, &mut buf) {
                        Ok(0) => break 'outer,
                        Ok(n) => {
                            for (i, &x) in buf[..n].iter().enumerate() {
                                let p = ((got + i) % 65521) as u64;
                                assert_eq!(x, ((p * 131) >> 7) as u8, "byte {}", got + i);
                            }
                            got += n;
                        }
                        Err(_) => break,
                    }
                }
            }
            b.transmit(now, &mut db);
            if db.pending() == 0 {
                break;
            }
        }
        now += Duration::from_micros(1);
    }
    assert_eq!(got, len, "the whole transfer arrived");
    let k = a.counters();
    Out { sender_ns: ns, acks_in: k.segs_in, merged: k.lro_acks }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let mb: usize = arg("--bytes").map(|s| s.trim_end_matches('M').parse().unwrap()).unwrap_or(256);
    let runs: usize = arg("--runs").and_then(|s| s.parse().ok()).unwrap_or(5);
    let len = mb << 20;
    if let Some(only) = arg("--only") {
        let (k, on) = only.split_once(':').expect("--only K:on|off");
        let o = run(len, k.parse().unwrap(), on == "on");
        println!("every {k} aggregation {on}: {} ACKs in, {} merged", o.acks_in, o.merged);
        return;
    }
    println!("ack_demand: {mb} MiB per transfer, median of {runs} runs, sender CPU only (thread CPU clock)");
    println!("| receiver ACKs | ACK aggregation off, us/KB | on, us/KB | on/off | ACKs merged (on) |");
    println!("|---|---:|---:|---:|---:|");
    for every in [2, 8] {
        let (mut off, mut on, mut merged) = (vec![], vec![], 0);
        for r in 0..runs {
            for agg in if r % 2 == 0 { [false, true] } else { [true, false] } {
                let o = run(len, every, agg);
                let us_per_kb = o.sender_ns as f64 / 1000.0 / (len as f64 / 1024.0);
                if agg {
                    on.push(us_per_kb);
                    merged = o.merged * 100 / o.acks_in.max(1);
                } else {
                    off.push(us_per_kb);
                }
            }
        }
        let (off, on) = (median(off), median(on));
        println!(
            "| every {}{} segment | {off:.4} | {on:.4} | {:.2} | {merged}% |",
            every,
            if every == 2 { "nd" } else { "th" },
            on / off
        );
    }
}
