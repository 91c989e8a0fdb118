//! Connection churn with the server closing first (HTTP/1.0 and many RPC protocols): the
//! server holds TIME-WAIT for every connection, and must never stop accepting for it.
//!
//! Two stacks over the in-memory pipe, on virtual time: 1,000,000 short connections, 100 at
//! a time, each one request and one response, the server closing first. None may be refused
//! or reset, none may take longer than a second of virtual time, nothing is retransmitted
//! (the link, 50 µs each way, loses nothing), and the heap this thread holds (a counting
//! allocator's live bytes) stays flat once every ephemeral port has been used. The client's 16,384
//! ephemeral ports are reused every 16,384 connections, so new SYNs meet their 4-tuple still
//! in TIME-WAIT and must reopen it (RFC 6191) or find it dropped early (over the limit).
//!
//! It prints the churn rate on virtual and on wall time. 1,000,000 connections take about
//! 15 s in a release build (`cargo test --release -p ackclock --test churn_timewait --
//! --nocapture`; the suite runs in release) and minutes in a debug build, where the test is
//! ignored unless asked for (`-- --ignored`); `CHURN_CONNECTIONS=N` runs fewer.

mod common;

use ackclock::phy::{pipe, Impaired, Impairment, PipeConfig};
use ackclock::socket::Event;
use ackclock::time::{Duration, Instant};
use ackclock::{Error, TcpHandle};
use common::alloc::{live_bytes, Counting};
use common::{config, Pair, A, B};
use std::collections::HashMap;
use std::net::SocketAddrV4;

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONCURRENT: usize = 100;
const REQUEST: &[u8] = b"GET /x HTTP/1.0\r\n\r\n";
const RESPONSE: usize = 300;
/// Longest a connection may take, connect to close, on virtual time.
const STALL: Duration = Duration::from_secs(1);

struct Client {
    opened: Instant,
    asked: bool,
    got: usize,
}

#[test]
#[cfg_attr(debug_assertions, ignore = "1,000,000 connections take minutes unoptimised: run with --release")]
fn a_million_short_connections_with_the_server_closing_first() {
    let total: u64 = std::env::var("CHURN_CONNECTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    // A LAN: 50 µs each way.
    let lan = Impairment { delay: Duration::from_micros(50), ..Impairment::default() };
    let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let (da, db) = (
        Impaired::new(da, lan, Impairment::default(), 1, 4096),
        Impaired::new(db, lan, Impairment::default(), 2, 4096),
    );
    let mut p = Pair::over(config(A, 1), config(B, 2), da, db);
    let max_tw = p.b.tcp().config().max_time_wait;
    p.b.tcp_listen(SocketAddrV4::new(B, 80), 128).unwrap();
    // Neighbours known from the start: the first hundred SYNs do not queue behind ARP.
    let (ma, mb) = (p.a.iface().mac(), p.b.iface().mac());
    p.a.iface_mut().insert_static_neighbor(B, mb);
    p.b.iface_mut().insert_static_neighbor(A, ma);
    let mut clients: HashMap<TcpHandle, Client> = HashMap::with_capacity(4 * CONCURRENT);
    let mut servers: HashMap<TcpHandle, usize> = HashMap::with_capacity(4 * CONCURRENT);
    let response = vec![b'r'; RESPONSE];
    let mut buf = vec![0u8; 4096];
    let (mut opened, mut done) = (0u64, 0u64);
    let (start_virtual, start_wall) = (p.now, std::time::Instant::now());
    // Live heap bytes every tenth of the run, from the second on (the client's ports have
    // all been used by then, so the server's TIME-WAIT table has all the tuples it will see)
    // until the last (when fewer than 100 connections are left open).
    let mut checkpoints: Vec<(u64, i64)> = Vec::with_capacity(16);
    let step = (total / 10).max(1);
    let server_turn = |b: &mut ackclock::Stack, s: TcpHandle, got: &mut usize, buf: &mut [u8]| -> bool {
        loop {
            match b.tcp_recv(s, buf) {
                Ok(0) => panic!("the client closed before the response"),
                Ok(n) => *got += n,
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("server recv: {e}"),
            }
        }
        if *got < REQUEST.len() {
            return false;
        }
        assert_eq!(b.tcp_send(s, &response), Ok(RESPONSE));
        b.tcp_close(s).unwrap();
        true
    };
    while done < total {
        while clients.len() < CONCURRENT && opened < total {
            let c = p.a.tcp_connect(SocketAddrV4::new(B, 80)).expect("a connect is never refused");
            clients.insert(c, Client { opened: p.now, asked: false, got: 0 });
            opened += 1;
        }
        p.a.receive(p.now, &mut p.da);
        p.b.receive(p.now, &mut p.db);
        while let Some(ev) = p.b.poll_event() {
            match ev {
                Event::Accept(l) => {
                    while let Ok(s) = p.b.tcp_accept(l) {
                        let mut got = 0;
                        if !server_turn(&mut p.b, s, &mut got, &mut buf) {
                            servers.insert(s, got);
                        }
                    }
                }
                Event::Tcp(s) => {
                    if let Some(got) = servers.get_mut(&s) {
                        if server_turn(&mut p.b, s, got, &mut buf) {
                            servers.remove(&s);
                        }
                    }
                }
            }
        }
        while let Some(ev) = p.a.poll_event() {
            let Event::Tcp(c) = ev else { continue };
            let Some(cl) = clients.get_mut(&c) else { continue };
            if !cl.asked && p.a.tcp_readiness(c).is_ok_and(|r| r.writable) {
                assert_eq!(p.a.tcp_send(c, REQUEST), Ok(REQUEST.len()));
                cl.asked = true;
            }
            loop {
                match p.a.tcp_recv(c, &mut buf) {
                    Ok(0) => {
                        assert_eq!(cl.got, RESPONSE);
                        p.a.tcp_close(c).unwrap();
                        clients.remove(&c);
                        done += 1;
                        if done % step == 0 && done >= 2 * step && done < total {
                            checkpoints.push((done, live_bytes()));
                        }
                        break;
                    }
                    Ok(n) => cl.got += n,
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("client connection {done}: {e}"),
                }
            }
        }
        p.a.transmit(p.now, &mut p.da);
        p.b.transmit(p.now, &mut p.db);
        p.advance();
        if let Some((c, cl)) = clients.iter().find(|(_, cl)| p.now - cl.opened > STALL) {
            panic!(
                "connection {:?} stalled: opened at {:?}, now {:?}, got {}, done {done}: {:?}\nclient {:?}\nserver {:?}",
                p.a.tcp_tuple(*c),
                cl.opened,
                p.now,
                cl.got,
                p.a.tcp_info(*c),
                p.a.counters(),
                p.b.counters()
            );
        }
    }
    let (virt, wall) = ((p.now - start_virtual).as_secs_f64(), start_wall.elapsed().as_secs_f64());
    let (ka, kb) = (p.a.counters(), p.b.counters());
    println!(
        "churn: {total} connections in {virt:.2} s virtual ({:.0}/s), {wall:.2} s wall ({:.0}/s); \
         server TIME-WAIT {} (limit {max_tw}), dropped early {}; heap at checkpoints {checkpoints:?}",
        total as f64 / virt,
        total as f64 / wall,
        p.b.tcp().time_wait(),
        kb.time_wait_overflow,
    );
    assert_eq!(kb.passive_opens, total);
    assert_eq!(ka.active_opens, total);
    assert_eq!((ka.failed_opens, ka.resets_received, kb.resets_received), (0, 0, 0));
    assert_eq!((ka.retransmitted, kb.retransmitted), (0, 0), "nothing was lost, nothing stalled");
    assert_eq!(kb.drops_listen_overflow + kb.drops_no_buffer + kb.syn_cookies_sent, 0);
    assert!(p.b.tcp().time_wait() <= max_tw);
    assert!(p.b.tcp().connections() <= max_tw + 2 * CONCURRENT, "slots: {}", p.b.tcp().connections());
    // Flat: after the first checkpoint, the heap moves by less than 64 KiB (hash tables
    // never shrink, and each stack's connection slab stays at its high-water mark).
    if let Some(&(_, first)) = checkpoints.first() {
        for &(n, bytes) in &checkpoints {
            assert!((bytes - first).abs() < 64 * 1024, "heap {bytes} B at {n} against {first} B: {checkpoints:?}");
        }
    }
}
