//! Bounded memory under hostile peers, on virtual time: the test plays a peer that floods
//! out-of-order data, one that advertises a zero window forever, one that never ACKs, and
//! thousands that open and vanish. Each test asserts a bound on what the stack holds: packet
//! buffers out of its pool (capacity less available), the heap this thread holds (the
//! counting allocator's live bytes), connection slots, and the counters that say where the
//! excess went. Each names the RFC section whose rule makes the bound.

mod common;

use ackclock::buf::PoolConfig;
use ackclock::phy::Capabilities;
use ackclock::tcp::{State, TcpConfig};
use ackclock::time::Duration;
use ackclock::wire::TcpFlags;
use ackclock::{Error, ListenerHandle, TcpHandle};
use common::alloc::{live_bytes, Counting};
use common::script::*;
use std::net::SocketAddrV4;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;
const MSS: u32 = 1460;

/// A script whose stack has `buffers` packet buffers (more than any bound below, so that a
/// bound that holds is the stack's and not the pool running dry) and `cfg`.
fn script(cfg: TcpConfig, buffers: usize) -> Script {
    let mut c = stack_config();
    c.tcp = cfg;
    c.pool = PoolConfig { buffers, ..Default::default() };
    Script::with_config(c, Capabilities::ethernet(1500))
}

/// Pool buffers out of the pool.
fn in_use(t: &Script) -> usize {
    t.stack.pool().capacity() - t.stack.pool().available()
}

/// Run virtual time forward to `ms` after the start, one timer at a time (not one
/// millisecond at a time: these peers last for simulated minutes), handing every segment
/// the stack sends to `peer`, which may answer.
fn run(t: &mut Script, ms: u64, mut peer: impl FnMut(&mut Script, Sent)) {
    let end = t.start + Duration::from_millis(ms);
    loop {
        for s in t.sent_now() {
            peer(t, s);
        }
        // The harness's log of every segment is not the stack's memory.
        t.log.clear();
        match t.stack.poll_at() {
            // A timer due now that had nothing to do: a millisecond on.
            Some(at) if at <= t.now => t.at_us((t.now - t.start).as_micros() as u64 + 1000),
            Some(at) if at <= end => t.at_us((at - t.start).as_micros() as u64),
            _ => break,
        }
        if t.now > end {
            break;
        }
    }
    t.at_us((end - t.start).as_micros() as u64);
    for s in t.sent_now() {
        peer(t, s);
    }
}

/// The heap this thread holds, less the harness's log of sent segments.
fn heap(t: &mut Script) -> i64 {
    t.log = Vec::new();
    live_bytes()
}

fn listen(t: &mut Script, backlog: usize) -> ListenerHandle {
    t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), backlog).unwrap()
}

/// Everything readable now.
fn recv_all(t: &mut Script, c: TcpHandle) -> Vec<u8> {
    let mut out = vec![];
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = t.stack.tcp_recv(c, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// The byte the harness puts at absolute peer sequence number `seq` (`Script::inject`).
fn byte_at(seq: u32) -> u8 {
    seq as u8
}

/// RFC 9293 §3.10.7.4 (segments beyond the window are not acceptable; "segments with higher
/// beginning sequence numbers ... may be held"), RFC 2018 §4 (at most four SACK blocks per
/// ACK): a peer that sends every other full-sized segment across ten windows leaves the
/// stack holding at most one window of out-of-order data; everything beyond the window is
/// counted as out-of-window and ACKed. Filling the holes then delivers the stream exactly.
#[test]
fn out_of_order_flood_holds_at_most_one_window() {
    let cfg = TcpConfig::default();
    let window = cfg.recv_buffer as u32;
    let mut t = script(cfg, 4096);
    let l = listen(&mut t, 8);
    let c = t.accept_with(l, seg("S").win(65535).mss(MSS as u16).ws(7).sack_ok());
    t.discard();
    let base = in_use(&t);
    let heap0 = heap(&mut t);
    let segments = 10 * window / MSS;
    let mut peak = 0;
    for k in (1..segments).step_by(2) {
        t.inject(t.ms(), seg(".").seq(P + k * MSS).ack(1).win(65535).len(MSS as usize));
        for s in t.sent_now() {
            assert!(s.sack.len() <= 4, "RFC 2018 §4: {s:?}");
        }
        peak = peak.max(in_use(&t) - base);
    }
    // Half the segments of one window, at most: those inside it.
    let held_max = (window / MSS / 2 + 1) as usize;
    assert!(peak <= held_max, "{peak} buffers held out of order, over {held_max}");
    let beyond = t.stack.counters().drops_out_of_window;
    assert!(beyond as u32 >= segments / 2 - window / MSS, "segments beyond the window counted: {beyond}");
    let grown = heap(&mut t) - heap0;
    eprintln!("out-of-order flood: {peak} buffers held at most, heap grew {grown} bytes, {beyond} beyond the window");
    // The queue's own bookkeeping, at most a few kilobytes for a window of holes.
    assert!(grown < 64 * 1024, "heap grew {grown} bytes");

    // Fill every hole, in order, reading as we go: the whole stream arrives byte-exact.
    let mut got = vec![];
    for k in 0..segments {
        t.inject(t.ms(), seg(".").seq(P + k * MSS).ack(1).win(65535).len(MSS as usize));
        t.discard();
        got.extend(recv_all(&mut t, c));
    }
    assert_eq!(got.len() as u32, segments * MSS);
    assert!(got.iter().enumerate().all(|(i, &b)| b == byte_at(P + i as u32)), "the stream differs");
    assert_eq!(in_use(&t), base, "every buffer back in the pool");
}

/// RFC 9293 §3.10.7.4, and the reason a segment count bounds the queue beside the window: a
/// peer sending every other *byte* of the window, one byte per segment, would otherwise pin
/// one buffer per byte. The stack holds at most a window's worth of full-sized segments'
/// buffers and counts the rest as a full receive queue.
#[test]
fn one_byte_holes_are_bounded_by_segments_not_bytes() {
    let cfg = TcpConfig::default();
    let window = cfg.recv_buffer as u32;
    let mut t = script(cfg, 8192);
    let l = listen(&mut t, 8);
    let _c = t.accept_with(l, seg("S").win(65535).mss(MSS as u16).ws(7).sack_ok());
    t.discard();
    let base = in_use(&t);
    let mut peak = 0;
    for k in 0..4096u32 {
        t.inject(t.ms(), seg(".").seq(P + 1 + 2 * k).ack(1).win(65535).len(1));
        t.discard();
        peak = peak.max(in_use(&t) - base);
    }
    // The queue's limit: a full window of segments half an MSS long.
    let limit = (window / (MSS / 2)) as usize;
    assert!(peak <= limit, "{peak} buffers held for one-byte segments, over {limit}");
    assert!(t.stack.counters().drops_rcvq_full >= 4096 - limit as u64, "{:?}", t.stack.counters());
    eprintln!("one-byte holes: {peak} buffers held at most (limit {limit})");
}

/// RFC 2018 §4, RFC 9293 §3.10.7.4: out-of-order segments at pseudo-random offsets and
/// lengths inside and beyond the window (duplicates and overlaps among them) never make
/// the stack hold more than a window's worth of buffers, and the stream filled in afterwards
/// is exact.
#[test]
fn random_holes_stay_within_the_window() {
    let cfg = TcpConfig::default();
    let window = cfg.recv_buffer as u32;
    let mut t = script(cfg, 8192);
    let l = listen(&mut t, 8);
    let c = t.accept_with(l, seg("S").win(65535).mss(MSS as u16).ws(7).sack_ok());
    t.discard();
    let base = in_use(&t);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut peak = 0;
    for _ in 0..5000 {
        let off = 1 + (rand() % (2 * window as u64)) as u32;
        let len = 1 + (rand() % MSS as u64) as usize;
        t.inject(t.ms(), seg(".").seq(P + off).ack(1).win(65535).len(len));
        for s in t.sent_now() {
            assert!(s.sack.len() <= 4, "RFC 2018 §4: {s:?}");
        }
        peak = peak.max(in_use(&t) - base);
    }
    let limit = (window / (MSS / 2)) as usize;
    assert!(peak <= limit, "{peak} buffers held, over {limit}");
    let total = 2 * window;
    let mut got = vec![];
    let mut at = 0;
    while at < total {
        t.inject(t.ms(), seg(".").seq(P + at).ack(1).win(65535).len(MSS as usize));
        t.discard();
        got.extend(recv_all(&mut t, c));
        at += MSS;
    }
    assert!(got.len() as u32 >= total, "{} of {total} bytes", got.len());
    assert!(got.iter().enumerate().all(|(i, &b)| b == byte_at(P + i as u32)), "the stream differs");
    eprintln!("random holes: {peak} buffers held at most (limit {limit})");
}

/// RFC 9293 §3.8.6.1 (the sender keeps probing a zero window, and "must not close the
/// connection" while the receiver answers), RFC 1122 §4.2.2.17: a peer that answers every
/// probe with a zero window for half an hour keeps the connection open, the probes keep
/// coming (backed off, RFC 6298 §5.5), and the stack holds after thirty minutes exactly what
/// it held after one: the same buffers, the same heap.
#[test]
fn zero_window_forever_keeps_probing_in_flat_memory() {
    let mut t = script(TcpConfig::default(), 1024);
    let l = listen(&mut t, 8);
    let c = t.accept_with(l, seg("S").win(65535).mss(MSS as u16));
    t.discard();
    let data = vec![0x42u8; 100_000];
    assert_eq!(t.stack.tcp_send(c, &data), Ok(100_000));
    // The first flight is ACKed, and the window closes.
    let flight: u32 = t.sent_now().iter().map(|s| s.len as u32).sum();
    assert!(flight > 0);
    t.inject(t.ms(), seg(".").seq(P).ack(1 + flight).win(0));
    let una = 1 + flight;
    let probes = std::cell::Cell::new(0u32);
    let answer = |t: &mut Script, s: Sent| {
        assert!(s.len <= 1, "only probes into a zero window: {s:?}");
        probes.set(probes.get() + 1);
        t.inject(t.ms(), seg(".").seq(P).ack(una).win(0));
    };
    run(&mut t, 60_000, answer);
    let (buffers, heap1, first) = (in_use(&t), heap(&mut t), probes.get());
    run(&mut t, 30 * 60_000, answer);
    let probes = probes.get();
    assert!(probes >= first + 10, "probes continue: {first} in the first minute, {probes} in thirty");
    assert_eq!(t.stack.tcp_info(c).unwrap().state, State::Established);
    assert_eq!(in_use(&t), buffers, "buffers after 30 min of probing against after 1 min");
    assert_eq!(heap(&mut t), heap1, "heap after 30 min of probing against after 1 min");
    assert_eq!(t.stack.counters().timeouts, 0);
    eprintln!("zero window: {probes} probes in 30 min; {buffers} buffers, flat heap");
}

/// RFC 6298 §5.5 (back off the timer on each retransmission), RFC 9293 §3.8.3 (R2: after
/// enough retransmissions close the connection), RFC 1122 §4.2.3.5: a peer that never ACKs
/// gets `max_retries` retransmissions, then the connection is aborted with a timeout, and
/// closing it gives every buffer and all its heap back.
#[test]
fn a_peer_that_never_acks_is_given_up_and_its_memory_freed() {
    let cfg = TcpConfig::default();
    let retries = cfg.max_retries as u64;
    let mut t = script(cfg, 1024);
    let l = listen(&mut t, 8);
    let base = in_use(&t);
    let heap0 = heap(&mut t);
    let c = t.accept_with(l, seg("S").win(65535).mss(MSS as u16));
    t.discard();
    assert_eq!(t.stack.tcp_send(c, &[7u8; 200_000]), Ok(200_000));
    t.discard();
    assert!(in_use(&t) > base);
    // Linux's tcp_retries2 of 15 takes about 15 minutes (RTO capped at 120 s); give it an hour.
    let mut sent = 0;
    run(&mut t, 3_600_000, |_, _| sent += 1);
    assert_eq!(t.stack.counters().timeouts, 1, "{:?}", t.stack.counters());
    assert_eq!(t.stack.counters().retransmitted, retries, "R2 after {retries} retransmissions");
    let mut buf = [0u8; 16];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Err(Error::TimedOut));
    let _ = t.stack.tcp_close(c);
    t.discard();
    assert_eq!(in_use(&t), base, "every buffer back in the pool");
    assert_eq!(t.stack.tcp().connections(), 0);
    let left = heap(&mut t) - heap0;
    eprintln!("never-ACKing peer: {sent} segments sent, then aborted; {left} bytes of heap left");
    assert!(left < 4096, "{left} bytes of heap still held after the abort");
}

/// RFC 4987 §3.1 and §3.6, RFC 9293 §3.10.7.2: five thousand SYNs from as many ports that
/// never complete the handshake hold at most a backlog of SYN-RECEIVED connections (the rest
/// are answered with SYN cookies, which hold nothing), and once the SYN-ACK retransmissions
/// are spent every one of them is gone, with its memory.
#[test]
fn thousands_of_half_open_connections_hold_a_backlog() {
    const SYNS: u16 = 5000;
    const BACKLOG: usize = 128;
    let cfg = TcpConfig::default();
    let mut t = script(cfg, 1024);
    let _l = listen(&mut t, BACKLOG);
    let base = in_use(&t);
    let heap0 = heap(&mut t);
    let mut synacks = 0;
    for i in 0..SYNS {
        t.inject(t.ms(), seg("S").seq(PEER_ISS + u32::from(i)).win(65535).mss(MSS as u16).peer_port(20000 + i));
        synacks += t.sent_now().iter().filter(|s| s.flags == TcpFlags::SYN | TcpFlags::ACK).count();
    }
    assert_eq!(synacks, SYNS as usize, "every SYN answered, from the queue or with a cookie");
    let c = *t.stack.counters();
    assert!(t.stack.tcp().connections() <= BACKLOG, "{} connections", t.stack.tcp().connections());
    assert_eq!(c.syn_cookies_sent, u64::from(SYNS) - BACKLOG as u64, "{c:?}");
    let held = heap(&mut t) - heap0;
    eprintln!("{SYNS} half-open: {} connections, {held} bytes of heap", t.stack.tcp().connections());
    // Per SYN-RECEIVED connection, well under what an established one may cost.
    assert!(held < (BACKLOG as i64) * 4096, "{held} bytes of heap for {BACKLOG} half-open connections");
    assert!(in_use(&t) - base <= BACKLOG, "{} buffers", in_use(&t) - base);
    // 1 + 2 + 4 + 8 + 16 + 32 s of SYN-ACK retransmissions (synack_retries 5), then gone.
    run(&mut t, 200_000, |_, _| {});
    assert_eq!(t.stack.tcp().connections(), 0);
    assert_eq!(in_use(&t), base, "every buffer back in the pool");
    let left = heap(&mut t) - heap0;
    assert!(left < 64 * 1024, "{left} bytes of heap still held once the half-open connections are gone");
}

/// RFC 9293 §3.8.3 (R2), RFC 6298 §5.5, and the connection limit: two thousand established
/// connections whose peers vanish with data unacknowledged are each given up after their
/// retransmissions, and closing them frees every buffer and slot; while they are open, a
/// connection past `max_connections` is refused a slot and counted.
#[test]
fn established_connections_whose_peers_vanished_are_reclaimed() {
    const N: u16 = 2000;
    let cfg = TcpConfig { max_connections: N as usize, ..TcpConfig::default() };
    let mut t = script(cfg, 8192);
    let base = in_use(&t);
    let l = listen(&mut t, N as usize);
    let mut conns = vec![];
    for i in 0..N {
        let port = 20000 + i;
        t.inject(t.ms(), seg("S").seq(PEER_ISS).win(65535).mss(MSS as u16).peer_port(port));
        let synack = t.sent_now().pop().expect("SYN-ACK");
        t.inject(t.ms(), seg(".").seq(P).ack(synack.seq + 1).win(65535).peer_port(port));
        conns.push(t.stack.tcp_accept(l).expect("accept"));
    }
    // One more: no slot for it, so no SYN-ACK, and the drop is counted.
    let before = *t.stack.counters();
    t.inject(t.ms(), seg("S").seq(PEER_ISS).win(65535).mss(MSS as u16).peer_port(20000 + N));
    assert!(t.sent_now().is_empty(), "a SYN past max_connections is not answered");
    let c = t.stack.counters();
    assert_eq!((c.drops_no_buffer, c.drops()), (before.drops_no_buffer + 1, before.drops() + 1), "{c:?}");
    assert_eq!(t.stack.tcp().connections(), N as usize);
    for &h in &conns {
        assert_eq!(t.stack.tcp_send(h, &[1u8; 1000]), Ok(1000));
    }
    t.discard();
    run(&mut t, 3_600_000, |_, _| {});
    assert_eq!(t.stack.counters().timeouts, u64::from(N), "{:?}", t.stack.counters());
    for h in conns {
        let _ = t.stack.tcp_close(h);
    }
    t.discard();
    run(&mut t, 3_700_000, |_, _| {});
    assert_eq!(t.stack.tcp().connections(), 0);
    let _ = t.stack.tcp_unlisten(l);
    assert_eq!(in_use(&t), base, "every buffer back in the pool");
}

/// RFC 894 (an Ethernet frame begins with a 14-byte header): frames shorter than the header,
/// which no AF_PACKET socket will send (so the TAP barrage in the CLI's tests cannot), are
/// each counted as malformed, and their buffers go back to the pool.
#[test]
fn frames_shorter_than_an_ethernet_header_are_counted() {
    let mut t = script(TcpConfig::default(), 64);
    let base = in_use(&t);
    for n in 0..14 {
        t.inject_raw(&vec![0xff; n]);
    }
    assert!(t.sent_now().is_empty(), "nothing answers a runt");
    let c = t.stack.counters();
    assert_eq!((c.drops_malformed, c.drops()), (14, 14), "{c:?}");
    assert_eq!(in_use(&t), base);
}

/// RFC 9293 §3.10.7.4 (out-of-order segments "may be held"): they are held only while the
/// pool they arrived in has room. Peers that each send one-byte segments above a hole, each
/// within its own connection's bound, cannot together take every buffer the device receives
/// into: once that pool is down to its last quarter the stack stops holding out-of-order
/// segments (counted as a full receive queue), and another connection's data still arrives.
#[test]
fn hostile_connections_together_cannot_empty_the_receive_pool() {
    const DEVICE_BUFFERS: usize = 512;
    let mut t = script(TcpConfig::default(), 1024);
    // The device's own receive pool, as a TAP has.
    let dev = ackclock::buf::Pool::new(PoolConfig { buffers: DEVICE_BUFFERS, ..Default::default() }).unwrap();
    let l = listen(&mut t, 16);
    let (mut acks, mut conns) = (vec![], vec![]);
    for i in 0..4u16 {
        let port = 30000 + i;
        t.inject(t.ms(), seg("S").seq(PEER_ISS).win(65535).mss(MSS as u16).peer_port(port));
        let synack = t.sent_now().pop().expect("SYN-ACK");
        t.inject(t.ms(), seg(".").seq(P).ack(synack.seq + 1).win(65535).peer_port(port));
        conns.push(t.stack.tcp_accept(l).expect("accept"));
        acks.push(synack.seq + 1);
    }
    // Three hostile peers, 400 one-byte segments each above a one-byte hole.
    for (i, &ack) in acks.iter().enumerate().take(3) {
        for k in 0..400u32 {
            let s = seg(".").seq(P + 1 + 2 * k).ack(ack).win(65535).len(1).peer_port(30000 + i as u16);
            t.inject_via(&dev, t.ms(), s);
            t.discard();
        }
    }
    let free = dev.available();
    assert!(free >= DEVICE_BUFFERS / 4 - 1, "{free} of {DEVICE_BUFFERS} device buffers left");
    assert!(t.stack.counters().drops_rcvq_full > 0);
    // The fourth connection's data arrives, through the same device pool.
    for k in 0..10u32 {
        let s = seg(".").seq(P + k * MSS).ack(acks[3]).win(65535).len(MSS as usize).peer_port(30003);
        t.inject_via(&dev, t.ms(), s);
        t.discard();
    }
    let got = recv_all(&mut t, conns[3]);
    assert_eq!(got.len() as u32, 10 * MSS);
    assert!(got.iter().enumerate().all(|(i, &b)| b == byte_at(P + i as u32)), "the stream differs");
    let held = DEVICE_BUFFERS - free;
    eprintln!("three hostile peers: {held} of {DEVICE_BUFFERS} device buffers held out of order");
}
