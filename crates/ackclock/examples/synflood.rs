//! A SYN flood against a listener, on virtual time over the in-memory pipe: 20,000 spoofed
//! SYNs a second (from addresses nobody answers for) while a client connects and fetches
//! 10 MB (the flood's SYN-ACKs go out too, to a gateway that drops them). Run once with SYN
//! cookies off (`SynCookies::Never`, the baseline: a full SYN queue
//! drops SYNs) and once with the default (`WhenFull`, RFC 4987 §3.6), and print for each the
//! virtual time the client's connection took, the transfer's virtual time, and the wall time
//! the server spent per flood SYN.
//!
//! ```sh
//! cargo run --release -p ackclock --example synflood
//! ```

use ackclock::buf::PoolConfig;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig};
use ackclock::tcp::SynCookies;
use ackclock::time::{Duration, Instant};
#[path = "support/spoofed_syn.rs"]
mod support;
use ackclock::{Error, Stack, StackConfig};
use core::net::Ipv4Addr;
use std::net::SocketAddrV4;
use support::spoofed_syn;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const FLOOD_PER_MS: u32 = 20;
const BYTES: usize = 10_000_000;

struct Run {
    connect: Option<Duration>,
    transfer: Option<Duration>,
    ns_per_syn: f64,
    cookies: u64,
    overflow: u64,
}

fn run(mode: SynCookies) -> Run {
    let config = |addr, seed| {
        let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
        c.seed = seed;
        c.pool = PoolConfig { buffers: 4096, ..Default::default() };
        c.tcp.syn_cookies = mode;
        // The flood's addresses lie outside the link's prefix: their SYN-ACKs go to the
        // gateway (the client's stack, which drops them), so they cost what they would.
        c.iface.gateway = Some(A);
        c
    };
    let (mut da, mut db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let mut now = Instant::from_secs(1);
    let caps = Capabilities::ethernet(1500);
    let mut a = Stack::new(config(A, 1), caps, now).unwrap();
    let mut b = Stack::new(config(B, 2), caps, now).unwrap();
    let l = b.tcp_listen(SocketAddrV4::new(B, 80), 128).unwrap();
    let mac = b.iface().mac();
    let (ma, mb) = (a.iface().mac(), b.iface().mac());
    a.iface_mut().insert_static_neighbor(B, mb);
    b.iface_mut().insert_static_neighbor(A, ma);
    let frames: Vec<Vec<u8>> = (0..FLOOD_PER_MS * 1000).map(|n| spoofed_syn(mac, B, 80, n)).collect();
    let (mut n, mut flood_ns, mut flood_syns) = (0usize, 0u128, 0u64);
    let start = now;
    let connect_at = start + Duration::from_secs(2);
    let (mut c, mut s, mut connected, mut done) = (None, None, None, None);
    let (mut sent, mut got) = (0, 0);
    let data = vec![0x5au8; 64 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let mut next_ms = now;
    // At least 10 s of flood (200,000 SYNs), and until the transfer is done or 60 s passed.
    let min_end = start + Duration::from_secs(12);
    while now < start + Duration::from_secs(62) && (done.is_none() || now < min_end) {
        if now >= next_ms {
            // One millisecond's worth of flood.
            let t = std::time::Instant::now();
            for _ in 0..FLOOD_PER_MS {
                let f = &frames[n % frames.len()];
                n += 1;
                let Ok(mut p) = b.pool().alloc() else { break };
                p.append(f.len()).unwrap().copy_from_slice(f);
                b.process(now, p);
                flood_syns += 1;
            }
            b.transmit(now, &mut db);
            flood_ns += t.elapsed().as_nanos();
            next_ms = now + Duration::from_millis(1);
        }
        if c.is_none() && now >= connect_at {
            c = Some(a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap());
        }
        a.receive(now, &mut da);
        b.receive(now, &mut db);
        if let (Some(ch), None) = (c, connected) {
            if a.tcp_readiness(ch).is_ok_and(|r| r.writable) {
                connected = Some(now - connect_at);
            }
        }
        s = s.or_else(|| b.tcp_accept(l).ok());
        if let Some(sh) = s {
            while sent < BYTES {
                match b.tcp_send(sh, &data[..(BYTES - sent).min(data.len())]) {
                    Ok(k) => sent += k,
                    Err(Error::WouldBlock | Error::NoBufferSpace) => break,
                    Err(e) => panic!("send: {e}"),
                }
            }
        }
        if let Some(ch) = c {
            while let Ok(k) = a.tcp_recv(ch, &mut buf) {
                if k == 0 {
                    break;
                }
                got += k;
            }
            if got == BYTES && done.is_none() {
                done = connected.map(|t| now - connect_at - t);
            }
        }
        a.transmit(now, &mut da);
        b.transmit(now, &mut db);
        let pending = da.pending() + db.pending() > 0;
        let next = [a.poll_at(), b.poll_at(), Some(next_ms)].into_iter().flatten().min().unwrap();
        now = if pending { now + Duration::from_micros(10) } else { next.max(now + Duration::from_micros(10)) };
    }
    let k = b.counters();
    Run {
        connect: connected,
        transfer: done,
        ns_per_syn: flood_ns as f64 / flood_syns.max(1) as f64,
        cookies: k.syn_cookies_sent,
        overflow: k.drops_listen_overflow,
    }
}

fn main() {
    println!(
        "SYN flood, {} SYN/s spoofed, backlog 128; client connects 2 s in, fetches {BYTES} B",
        FLOOD_PER_MS * 1000
    );
    let show = |d: Option<Duration>| d.map_or("never (60 s)".to_string(), |d| format!("{:.3} s", d.as_secs_f64()));
    let base = run(SynCookies::Never);
    let cook = run(SynCookies::WhenFull);
    for (name, r) in [("no cookies (baseline)", &base), ("SYN cookies", &cook)] {
        println!(
            "{name:22} connect {:>14}  transfer {:>14}  {:7.0} ns/flood SYN  cookies sent {:>8}  SYNs dropped {:>8}",
            show(r.connect),
            show(r.transfer),
            r.ns_per_syn,
            r.cookies,
            r.overflow
        );
    }
    println!("wall time per flood SYN, cookies / baseline: {:.2}x", cook.ns_per_syn / base.ns_per_syn);
}
