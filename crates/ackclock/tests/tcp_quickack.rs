//! No stall at the end of a write: Minshall's refinement of Nagle's algorithm and quick ACKs.
//!
//! Nagle's algorithm (RFC 896, RFC 9293 §3.7.4) holds a short segment while data is
//! unacknowledged, and a receiver that delays its ACKs (RFC 5681 §4.2, RFC 1122 §4.2.3.2)
//! may sit on the ACK that would release it for the whole delayed-ACK time: every write that
//! ends in a short segment behind an odd number of full ones stalls for 40 ms. Two rules,
//! both Linux's, remove the stall:
//!
//! - Minshall's variant of Nagle (Minshall, "A Proposed Modification to Nagle's Algorithm",
//!   draft-minshall-nagle-01; Linux `tcp_minshall_check`, `tcp_nagle_check`): a short segment
//!   waits only while another *short* segment is unacknowledged. Full-sized segments in
//!   flight do not hold back the tail of a write.
//! - Quick ACKs (Linux `tcp_incr_quickack`, `tcp_event_data_recv`, `__tcp_ack_snd_check`):
//!   at the start of a connection and after the receiver has been idle longer than the RTO,
//!   every data segment is acknowledged at once, for min(window / (2 MSS), 16) ACKs (at least
//!   2), unless the connection is interactive (Linux's "pingpong" mode: we sent data within
//!   the delayed-ACK time of the last data received, so our ACKs ride on our data).
//!
//! The packet-level tests follow the conventions of `common/script.rs`; the last ones run
//! request/response exchanges between two stacks on virtual time.

mod common;

use ackclock::tcp::TcpConfig;
use ackclock::time::Duration;
use ackclock::{Error, TcpHandle};
use common::script::*;
use common::{stream, Pair};
use std::net::SocketAddrV4;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stack listening on 8080 with `cfg`, and a connection accepted at 0 ms from a peer
/// offering MSS 1460, window 65535 and no options (so our window field is min(free buffer,
/// 65535), our MSS 1460, and a full-sized segment 1460 bytes each way).
fn established(cfg: TcpConfig) -> (Script, TcpHandle) {
    let mut t = Script::new(cfg);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    (t, c)
}

/// The peer's `i`-th full-sized segment (1460 bytes from P + 1460 i), acknowledging our SYN.
fn full(i: u32) -> Seg {
    seg(".").seq(P + 1460 * i).ack(1).win(65535).len(1460)
}

/// Quick ACKs sent, counted by the stack and by the connection.
fn quick_acks(t: &Script, c: TcpHandle) -> (u64, u64) {
    (t.stack.counters().quick_acks, t.stack.tcp_info(c).unwrap().stats.quick_acks)
}

/// Set the script clock to `ms` (for socket calls between injections).
fn at_ms(t: &mut Script, ms: u64) {
    t.at_us(ms * 1000);
}

// ---------------------------------------------------------------------------------------
// Minshall's refinement of Nagle's algorithm
// ---------------------------------------------------------------------------------------

/// Linux `tcp_minshall_check` / `tcp_nagle_check` (draft-minshall-nagle-01): a write of three
/// full-sized segments and a 500-byte tail leaves whole at once; the tail is not held
/// behind the unacknowledged full-sized segments (RFC 9293 §3.7.4's plain Nagle would hold
/// it until all three were acknowledged). With the 500-byte segment unacknowledged, a short
/// write waits, and later short writes join it; a full-sized segment still goes at once
/// (Nagle never holds one). An ACK covering the full-sized segments but not the short one
/// releases nothing; the ACK of the short segment releases the waiting ones as one segment.
#[test]
fn minshall_holds_a_short_segment_only_behind_another_short_segment() {
    let (mut t, c) = established(tcp_config());
    let data = stream(3 * 1460 + 500 + 100 + 200 + 1460 + 50, 3);
    let mut off = 0;
    let mut write = |t: &mut Script, n: usize| {
        assert_eq!(t.stack.tcp_send(c, &data[off..off + n]), Ok(n));
        off += n;
    };
    write(&mut t, 3 * 1460 + 500);
    for i in 0..3u32 {
        let s = t.expect(10, seg(".").seq(1 + 1460 * i).ack(P).win(65535).len(1460));
        assert_eq!(s.payload, data[1460 * i as usize..1460 * (i as usize + 1)]);
    }
    let tail = t.expect(10, seg("P.").seq(1 + 3 * 1460).ack(P).win(65535).len(500));
    assert_eq!(tail.payload, data[3 * 1460..3 * 1460 + 500]);
    // The short segment [4381, 4881) is in flight: short writes wait and collect.
    write(&mut t, 100);
    t.expect_nothing(11);
    write(&mut t, 200);
    t.expect_nothing(12);
    // The full-sized segments acknowledged, the short one not: still held.
    t.inject(20, seg(".").seq(P).ack(1 + 3 * 1460).win(65535));
    t.expect_nothing(20);
    // The short segment acknowledged: the 300 waiting bytes go as one segment.
    t.inject(30, seg(".").seq(P).ack(1 + 3 * 1460 + 500).win(65535));
    let s = t.expect(30, seg("P.").seq(4881).ack(P).win(65535).len(300));
    assert_eq!(s.payload, data[4880..5180]);
    // With that short segment unacknowledged, a full-sized segment goes, its 50-byte tail waits.
    write(&mut t, 1460 + 50);
    t.expect(40, seg(".").seq(5181).ack(P).win(65535).len(1460));
    t.expect_nothing(41);
    t.inject(50, seg(".").seq(P).ack(5181).win(65535));
    let s = t.expect(50, seg("P.").seq(6641).ack(P).win(65535).len(50));
    assert_eq!(s.payload, data[6640..]);
    t.expect_nothing(100);
}

// ---------------------------------------------------------------------------------------
// Quick ACKs
// ---------------------------------------------------------------------------------------

/// Linux `tcp_event_data_recv` / `tcp_incr_quickack` / `__tcp_ack_snd_check`: the first data
/// of a connection enters quick-ACK mode with min(window / (2 MSS), 16) quick ACKs; with
/// the default 256 KiB buffer the window field is 65535 (no window scaling), 65535 / 2920 =
/// 22, so 16. The first 16 segments, arriving one at a time, are each acknowledged at once
/// instead of by the delayed-ACK timer (RFC 5681 §4.2); the 17th waits the 40 ms, as RFC
/// 5681 §4.2 allows; the 18th and 19th draw the every-second-segment ACK. Sixteen quick
/// ACKs are counted.
#[test]
fn sixteen_quick_acks_at_the_start_of_a_connection() {
    let (mut t, c) = established(tcp_config());
    for i in 0..16u32 {
        let ms = 10 + i as u64;
        t.inject(ms, full(i));
        t.expect(ms, seg(".").seq(1).ack(P + 1460 * (i + 1)).win(65535));
    }
    assert_eq!(quick_acks(&t, c), (16, 16));
    t.inject(30, full(16));
    t.expect_nothing(69);
    t.expect(70, seg(".").seq(1).ack(P + 1460 * 17).win(65535));
    t.inject(80, full(17));
    t.expect_nothing(85);
    t.inject(85, full(18));
    t.expect(85, seg(".").seq(1).ack(P + 1460 * 19).win(65535));
    t.expect_nothing(200);
    assert_eq!(quick_acks(&t, c), (16, 16));
}

/// Linux `tcp_incr_quickack`: the count follows the receive window, min(window / (2 MSS),
/// 16). A 12,000-byte buffer offers a 12,000-byte window: 12000 / 2920 = 4 quick ACKs, then
/// the delayed-ACK rule (RFC 5681 §4.2). A 2,000-byte buffer (less than one window of two
/// segments) still gets 2.
#[test]
fn the_quick_ack_count_follows_the_receive_window() {
    let (mut t, c) = established(TcpConfig { recv_buffer: 12_000, ..tcp_config() });
    for i in 0..4u32 {
        let ms = 10 + i as u64;
        t.inject(ms, full(i));
        t.expect(ms, seg(".").seq(1).ack(P + 1460 * (i + 1)).win(12_000 - 1460 * (i as u16 + 1)));
    }
    t.inject(20, full(4));
    t.expect_nothing(59);
    t.expect(60, seg(".").seq(1).ack(P + 1460 * 5).win(12_000 - 1460 * 5));
    assert_eq!(quick_acks(&t, c), (4, 4));

    let (mut t, c) = established(TcpConfig { recv_buffer: 2_000, ..tcp_config() });
    let small = |i: u32| seg(".").seq(P + 500 * i).ack(1).win(65535).len(500);
    for i in 0..2u32 {
        t.inject(10 + i as u64, small(i));
        t.expect(10 + i as u64, seg(".").seq(1).ack(P + 500 * (i + 1)).win(2_000 - 500 * (i as u16 + 1)));
    }
    t.inject(20, small(2));
    t.expect_nothing(59);
    t.expect(60, seg(".").seq(1).ack(P + 1500).win(500));
    assert_eq!(quick_acks(&t, c), (2, 2));
}

/// Linux `tcp_event_data_recv`: data after the receiver was idle longer than the RTO
/// re-enters quick-ACK mode (the sender restarts from a small window after idle, RFC 5681
/// §4.1, and each of its segments should be acknowledged at once). Data after a gap of
/// exactly the RTO does not.
#[test]
fn quick_acks_again_after_idle_longer_than_the_rto() {
    let (mut t, c) = established(TcpConfig { recv_buffer: 12_000, ..tcp_config() });
    let rto = t.stack.tcp_info(c).unwrap().rto;
    assert_eq!(rto, ms(200), "the RTO after the handshake's RTT sample (the minimum)");
    // Spend the four quick ACKs, then read everything (a window update: 5840 >= 2 MSS).
    for i in 0..4u32 {
        t.inject(10 + i as u64, full(i));
        t.expect(10 + i as u64, seg(".").seq(1).ack(P + 1460 * (i + 1)).win(12_000 - 1460 * (i as u16 + 1)));
    }
    let mut buf = vec![0u8; 12_000];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(4 * 1460));
    t.expect(20, seg(".").seq(1).ack(P + 4 * 1460).win(12_000));
    // 200 ms after the last data (13 ms): not idle longer than the RTO. Delayed.
    t.inject(213, full(4));
    t.expect_nothing(252);
    t.expect(253, seg(".").seq(1).ack(P + 5 * 1460).win(12_000 - 1460));
    // 201 ms after the last data (213 ms): quick again. The window is 10,540 now (the data
    // at 213 ms is unread): 10540 / 2920 = 3 quick ACKs, then the delayed-ACK rule.
    for i in 0..3u32 {
        let ms = 414 + i as u64;
        t.inject(ms, full(5 + i));
        t.expect(ms, seg(".").seq(1).ack(P + 1460 * (6 + i)).win(12_000 - 1460 * (i as u16 + 2)));
    }
    t.inject(420, full(8));
    t.expect_nothing(459);
    t.expect(460, seg(".").seq(1).ack(P + 1460 * 9).win(12_000 - 1460 * 5));
    assert_eq!(quick_acks(&t, c), (7, 7));
}

/// Linux `tcp_event_data_sent` (pingpong mode) and `tcp_delack_timer_handler`: once we answer
/// data with data within the delayed-ACK time, the connection is interactive and quick ACKs
/// stop although some are left: the peer's next request is not acknowledged at once, and
/// the ACK rides on our answer. When the delayed-ACK timer fires instead (we did not
/// answer), the connection is no longer taken as interactive, and quick ACKs resume.
#[test]
fn quick_acks_stop_while_the_connection_is_interactive() {
    let (mut t, c) = established(tcp_config());
    let req = |n: u32| seg("P.").seq(P + 100 * n).ack(1 + 200 * n.min(2)).win(65535).len(100);
    let mut buf = [0u8; 1000];
    // A request: quick-ACK mode acknowledges it at once.
    t.inject(10, req(0));
    t.expect(10, seg(".").seq(1).ack(P + 100).win(65535));
    // The answer, 5 ms later (within the 40 ms delayed-ACK time): interactive from now on.
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(100));
    at_ms(&mut t, 15);
    t.stack.tcp_send(c, &[1; 200]).unwrap();
    t.expect(15, seg("P.").seq(1).ack(P + 100).win(65535).len(200));
    // The next request is not acknowledged at once; the answer carries the ACK.
    t.inject(20, req(1));
    t.expect_nothing(24);
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(100));
    t.stack.tcp_send(c, &[2; 200]).unwrap();
    t.expect(25, seg("P.").seq(201).ack(P + 200).win(65535).len(200));
    // A request we do not answer: the delayed ACK, after 40 ms...
    t.inject(30, req(2));
    t.expect_nothing(69);
    t.expect(70, seg(".").seq(1 + 400).ack(P + 300).win(65535));
    // ...ends the interactive mode: the next request is acknowledged at once again.
    t.inject(80, seg("P.").seq(P + 300).ack(401).win(65535).len(100));
    t.expect(80, seg(".").seq(401).ack(P + 400).win(65535));
    assert_eq!(quick_acks(&t, c), (2, 2));
}

/// `TcpConfig::quick_acks` off: every ACK follows RFC 5681 §4.2 alone. The connection's first
/// segment waits for the delayed-ACK timer (40 ms), and so does one after idling longer than
/// the RTO; a second segment draws the ACK at once. No quick ACK is counted.
#[test]
fn quick_acks_off_restores_delayed_acks() {
    let (mut t, c) = established(TcpConfig { quick_acks: false, ..tcp_config() });
    t.inject(10, full(0));
    t.expect_nothing(49);
    t.expect(50, seg(".").seq(1).ack(P + 1460).win(65535));
    t.inject(60, full(1));
    t.inject(61, full(2));
    t.expect(61, seg(".").seq(1).ack(P + 3 * 1460).win(65535));
    t.inject(2000, full(3));
    t.expect_nothing(2039);
    t.expect(2040, seg(".").seq(1).ack(P + 4 * 1460).win(65535));
    assert_eq!(quick_acks(&t, c), (0, 0));
}

// ---------------------------------------------------------------------------------------
// Request/response between two stacks, on virtual time
// ---------------------------------------------------------------------------------------

/// One exchange on an established connection: `c` (on a) writes `req`, `s` (on b) reads all
/// of it and then writes `resp`, which `c` reads. Both ends write as the application of the
/// canonical sans-IO loop does (between receive and transmit). Checks every byte and returns
/// the virtual time from the request's write to the response's last byte.
fn exchange(p: &mut Pair, c: TcpHandle, s: TcpHandle, req: &[u8], resp: &[u8]) -> Duration {
    let start = p.now;
    let (mut req_sent, mut req_got, mut resp_sent) = (0, Vec::new(), 0);
    let mut resp_got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let done = p.run_until(Duration::from_secs(10), |p| {
        while req_sent < req.len() {
            match p.a.tcp_send(c, &req[req_sent..]) {
                Ok(n) => req_sent += n,
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("client send: {e}"),
            }
        }
        while req_got.len() < req.len() {
            match p.b.tcp_recv(s, &mut buf) {
                Ok(0) => panic!("server: end of stream"),
                Ok(n) => req_got.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("server recv: {e}"),
            }
        }
        if req_got.len() == req.len() {
            while resp_sent < resp.len() {
                match p.b.tcp_send(s, &resp[resp_sent..]) {
                    Ok(n) => resp_sent += n,
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("server send: {e}"),
                }
            }
        }
        loop {
            match p.a.tcp_recv(c, &mut buf) {
                Ok(0) => panic!("client: end of stream"),
                Ok(n) => resp_got.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("client recv: {e}"),
            }
        }
        resp_got.len() == resp.len()
    });
    assert!(done, "exchange of {} / {} bytes did not finish in 10 s of virtual time", req.len(), resp.len());
    assert!(req_got == req, "request bytes differ");
    assert!(resp_got == resp, "response bytes differ");
    p.now.saturating_duration_since(start)
}

/// Request/response exchanges of 1 KB, 10 KB, 64 KB and 100 KB (each way) between two
/// ackclock stacks over the in-memory pipe (no delay), Nagle on at both ends, default
/// delayed ACKs (40 ms): each exchange finishes in well under the delayed-ACK time of
/// virtual time, on a fresh connection (quick ACKs), on one in interactive use (Linux's
/// pingpong mode: the ACKs ride on the responses), and after an idle period longer than the
/// RTO; whether the receivers take one frame per poll, two, or 64. Before Minshall's rule
/// and quick ACKs, with one or two frames per poll, the 10 KB and 64 KB exchanges took 40
/// or 80 ms (Nagle held each direction's tail behind an odd full-sized segment whose ACK
/// the receiver delayed by its timer).
#[test]
fn request_response_exchanges_finish_well_under_the_delayed_ack_time() {
    for (&n, batch) in [1024usize, 10 * 1024, 64 * 1024, 100 * 1024].iter().flat_map(|n| [(n, 1), (n, 2), (n, 64)]) {
        let (mut ca, mut cb) = (common::config(common::A, 1), common::config(common::B, 2));
        (ca.batch, cb.batch) = (batch, batch);
        let mut p = Pair::with(ca, cb);
        assert!(!p.a.tcp().config().nodelay && !p.b.tcp().config().nodelay, "Nagle is on");
        let (c, s) = p.connect(80);
        let (req, resp) = (stream(n, n as u32), stream(n, n as u32 + 1));
        let mut times = vec![];
        // Three exchanges back to back, an idle period of 3 s (longer than the RTO, at most
        // the initial 1 s here), then three more.
        for round in 0..6 {
            if round == 3 {
                let idle = p.now + Duration::from_secs(3);
                assert!(p.run_until(Duration::from_secs(4), |p| p.now >= idle));
            }
            times.push(exchange(&mut p, c, s, &req, &resp));
        }
        let us: Vec<_> = times.iter().map(|t| t.as_micros()).collect();
        println!("request/response {n:>6} B each way, {batch:>2} frames per poll: {us:?} us of virtual time");
        for (round, t) in times.iter().enumerate() {
            assert!(*t < Duration::from_millis(5), "{n} bytes each way, exchange {round}: {t:?} of virtual time");
        }
        if batch == 1 && n > 1460 {
            // Segments one at a time: the first of each request was acknowledged at once.
            assert!(p.b.counters().quick_acks > 0, "{n} bytes: the server sent quick ACKs");
        }
        p.close_and_drain(c, s);
    }
}

/// A request written as two short writes (a 100-byte header, then a 500-byte body, once the
/// header has left) on a fresh connection between two stacks: Minshall's rule holds the body until the header is
/// acknowledged, and a quick ACK (the server's first data, Linux `tcp_event_data_recv`)
/// brings that ACK at once, so the exchange finishes in well under the delayed-ACK time of
/// virtual time. With quick ACKs off the body waits for the server's delayed ACK (40 ms).
#[test]
fn a_request_in_two_short_writes_is_not_held_for_the_delayed_ack() {
    let run = |quick_acks: bool| {
        let (mut ca, mut cb) = (common::config(common::A, 1), common::config(common::B, 2));
        (ca.tcp.quick_acks, cb.tcp.quick_acks) = (quick_acks, quick_acks);
        // 64 KB receive buffers: no window scaling, so the server's first read, which opens
        // nothing worth announcing, sends no window update that would acknowledge the header.
        (ca.tcp.recv_buffer, cb.tcp.recv_buffer) = (65535, 65535);
        let mut p = Pair::with(ca, cb);
        let (c, s) = p.connect(80);
        let (header, body, resp) = (stream(100, 1), stream(500, 2), stream(1000, 3));
        let start = p.now;
        let (mut step, mut req, mut answered, mut got) = (0, Vec::new(), false, Vec::new());
        let mut buf = vec![0u8; 4096];
        assert!(p.run_until(Duration::from_secs(1), |p| {
            // The header leaves (transmit runs between the steps) before the body is written.
            match step {
                0 => assert_eq!(p.a.tcp_send(c, &header), Ok(100)),
                1 => assert_eq!(p.a.tcp_send(c, &body), Ok(500)),
                _ => {}
            }
            step += 1;
            while let Ok(n) = p.b.tcp_recv(s, &mut buf) {
                req.extend_from_slice(&buf[..n]);
            }
            if req.len() == 600 && !answered {
                assert_eq!(p.b.tcp_send(s, &resp), Ok(1000));
                answered = true;
            }
            while let Ok(n) = p.a.tcp_recv(c, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
            got.len() == resp.len()
        }));
        assert!(req[..100] == header[..] && req[100..] == body[..] && got == resp);
        (p.now.saturating_duration_since(start), p.b.counters().quick_acks)
    };
    let (quick, quick_acks) = run(true);
    println!("two short writes: {} us with quick ACKs, {quick_acks} quick ACK(s) sent", quick.as_micros());
    assert!(quick < Duration::from_millis(5), "{quick:?} of virtual time");
    assert_eq!(quick_acks, 1, "the header's ACK");
    let (delayed, quick_acks) = run(false);
    println!("two short writes: {} us without quick ACKs", delayed.as_micros());
    assert!(delayed >= Duration::from_millis(40), "{delayed:?}: the body waited for the delayed ACK");
    assert_eq!(quick_acks, 0);
}
