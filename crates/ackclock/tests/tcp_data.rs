//! Packet-level tests: data transfer and timers (RFC 9293 §3.7-3.10, RFC 5681, RFC 6298,
//! RFC 7323, RFC 2018/2883), plus the deferred receive checksum and malformed input.
//!
//! Conventions (see `common/script.rs`): the test plays the peer; our sequence numbers are
//! relative to our ISS (our first data byte is 1), the peer's are absolute and its first data
//! byte is [`P`]. Unless a test says otherwise the peer's SYN carries no window scale, so our
//! window field is min(free buffer, 65535) and the peer's is taken as is.

mod common;

use ackclock::tcp::{KeepAlive, SocketOptions, State, TcpConfig};
use ackclock::time::Duration;
use ackclock::wire::{Ipv4Packet, TcpPacket};
use ackclock::{Error, ListenerHandle, TcpHandle};
use common::script::*;
use common::stream;
use std::net::SocketAddrV4;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stack listening on 8080 with `cfg`, and a connection accepted from a peer sending `syn`
/// (the harness's `accept_with`: SYN, SYN-ACK and ACK all at the current time).
fn established(cfg: TcpConfig, syn: Seg) -> (Script, TcpHandle) {
    let mut t = Script::new(cfg);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, syn);
    (t, c)
}

/// A passive open with control over the last step: the peer's `syn` at the current time, our
/// SYN-ACK (returned), and the peer's ACK at `ack_ms` with window field `ack_win` (echoing our
/// TSval, its own TSval one more than the SYN's, when both sides sent timestamps).
fn passive_open(t: &mut Script, l: ListenerHandle, syn: Seg, ack_ms: u64, ack_win: u16) -> (TcpHandle, Sent) {
    let now = t.ms();
    t.inject(now, syn.clone().seq(PEER_ISS));
    let synack = t.expect(now, seg("S.").seq(0).ack(PEER_ISS + 1).any_options());
    let mut ack = seg(".").seq(P).ack(1).win(ack_win);
    if let (Some((v, _)), Some((sv, _))) = (syn.ts, synack.ts) {
        ack = ack.ts(v + 1, sv);
    }
    t.inject(ack_ms, ack);
    let c = t.stack.tcp_accept(l).expect("accept after the handshake");
    (c, synack)
}

/// The TSval of a segment we sent (what the peer echoes).
fn tsval(s: &Sent) -> u32 {
    s.ts.expect("the segment carries timestamps").0
}

/// Everything `tcp_recv` returns now, until it would block.
fn recv_all(t: &mut Script, c: TcpHandle) -> Vec<u8> {
    let mut out = vec![];
    let mut buf = vec![0u8; 4096];
    loop {
        match t.stack.tcp_recv(c, &mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(Error::WouldBlock) => return out,
            Err(e) => panic!("tcp_recv: {e}"),
        }
    }
}

/// Step virtual time 1 ms at a time until the stack sends something (at most until `limit`);
/// returns the time and what was sent.
fn run_until_sent(t: &mut Script, limit: u64) -> (u64, Vec<Sent>) {
    while t.ms() < limit {
        let next = t.ms() + 1;
        let out = t.run_to(next);
        if !out.is_empty() {
            return (next, out.into_iter().map(|(_, s)| s).collect());
        }
    }
    panic!("nothing sent up to {limit} ms");
}

/// Set the script clock to `ms` (for `inject_raw`, which uses the current time).
fn at(t: &mut Script, ms: u64) {
    t.at_us(ms * 1000);
}

/// Offset of the TCP payload in a frame built by `Script::frame`.
fn payload_offset(frame: &[u8]) -> usize {
    let tcp = TcpPacket::new_unchecked(&frame[34..]);
    34 + tcp.header_len()
}

/// Recompute the IPv4 total length and header checksum of a frame whose length changed.
fn fix_ipv4(frame: &mut [u8]) {
    let len = (frame.len() - 14) as u16;
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..34]);
    ip.set_total_len(len);
    ip.fill_checksum();
}

/// Recompute the TCP checksum of a frame (after editing its header).
fn fix_tcp(frame: &mut [u8]) {
    TcpPacket::new_unchecked(&mut frame[34..]).fill_checksum(PEER, LOCAL);
}

// ---------------------------------------------------------------------------------------
// 1. Segmentation, initial window, peer window
// ---------------------------------------------------------------------------------------

/// RFC 9293 §3.7.1, RFC 6691: with timestamps negotiated a full-sized segment carries the
/// peer's MSS (1460) less the 12-byte timestamps option; a 10,000-byte send leaves as six
/// 1448-byte segments and the 1312-byte tail at once (Nagle, RFC 9293 §3.7.4, as refined by
/// Minshall, Linux `tcp_minshall_check`: no short segment is in flight to hold the tail).
/// The payload is the application's bytes, in order.
#[test]
fn bulk_send_is_segmented_at_the_effective_mss() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460).sack_ok().ts(1000, 0));
    assert_eq!(t.stack.tcp_info(c).unwrap().eff_mss, 1448);
    let data = stream(10_000, 1);
    assert_eq!(t.stack.tcp_send(c, &data), Ok(10_000));
    let mut last = None;
    for i in 0..6u32 {
        let s = t.expect(1, seg(".").seq(1 + 1448 * i).ack(P).win(65535).ts(ANY, ANY).len(1448));
        assert_eq!(s.payload, data[(1448 * i) as usize..(1448 * (i + 1)) as usize], "segment {i} payload");
        last = Some(s);
    }
    let tail = t.expect(1, seg("P.").seq(1 + 6 * 1448).ack(P).win(65535).ts(ANY, ANY).len(1312));
    assert_eq!(tail.payload, data[6 * 1448..]);
    t.expect_nothing(9);
    t.inject(10, seg(".").seq(P).ack(1 + 2 * 1448).win(65535).ts(1002, tsval(last.as_ref().unwrap())));
    t.expect_nothing(10);
    t.inject(20, seg(".").seq(P).ack(10_001).win(65535).ts(1004, tsval(&tail)));
    t.expect_nothing(300);
    assert_eq!(t.stack.tcp_info(c).unwrap().flight, 0);
}

/// A send of no bytes queues nothing and returns 0 at once, even with the send buffer full
/// (`send(2)` of no bytes), where a send of one byte would block; after the peer's RST it
/// gives the connection's error like any send.
#[test]
fn an_empty_send_returns_zero_even_with_the_send_buffer_full() {
    let (mut t, c) = established(tcp_config(), seg("S").win(0).mss(1460).ts(1000, 0));
    let data = stream(1 << 20, 1);
    let mut queued = 0;
    while let Ok(n) = t.stack.tcp_send(c, &data) {
        queued += n;
    }
    assert!(queued > 0);
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::WouldBlock));
    assert_eq!(t.stack.tcp_send(c, &[]), Ok(0));
    assert_eq!(t.stack.tcp_send(c, b"x"), Err(Error::WouldBlock), "nothing was queued");
    t.inject(10, seg("R").seq(P));
    assert_eq!(t.stack.tcp_send(c, &[]), Err(Error::Reset));
}

/// RFC 6928 / RFC 5681 §3.1: the first flight is at most IW = 10 segments, whatever the
/// peer's window; RFC 9293 §3.8.6.2.1: it is also bounded by the peer's window, and sender
/// SWS avoidance sends no runt into what is left of it.
#[test]
fn first_flight_is_bounded_by_the_initial_window_and_the_peer_window() {
    // Initial window: 20,000 bytes queued, ten 1448-byte segments leave.
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460).ts(1000, 0));
    let data = stream(20_000, 2);
    assert_eq!(t.stack.tcp_send(c, &data), Ok(20_000));
    let mut last = None;
    for i in 0..10u32 {
        last = Some(t.expect(1, seg(".").seq(1 + 1448 * i).ack(P).win(65535).ts(ANY, ANY).len(1448)));
    }
    t.expect_nothing(9);
    // Everything acknowledged: the three remaining full segments go, and the short tail with
    // them (Nagle as refined by Minshall, Linux `tcp_minshall_check`: no short segment is in
    // flight).
    t.inject(10, seg(".").seq(P).ack(1 + 14_480).win(65535).ts(1001, tsval(last.as_ref().unwrap())));
    for i in 10..13u32 {
        t.expect(10, seg(".").seq(1 + 1448 * i).ack(P).win(65535).ts(ANY, ANY).len(1448));
    }
    t.expect(10, seg("P.").seq(1 + 13 * 1448).ack(P).win(65535).ts(ANY, ANY).len(20_000 - 13 * 1448));
    t.expect_nothing(19);

    // Peer window of 5000 bytes: three segments (4344 bytes); the 656 bytes left are less
    // than an MSS and less than half the peer's largest window, so nothing more is sent.
    let (mut t, c) = established(tcp_config(), seg("S").win(5000).mss(1460).ts(1000, 0));
    assert_eq!(t.stack.tcp_send(c, &data), Ok(20_000));
    let mut last = None;
    for i in 0..3u32 {
        last = Some(t.expect(1, seg(".").seq(1 + 1448 * i).ack(P).win(65535).ts(ANY, ANY).len(1448)));
    }
    t.expect_nothing(9);
    t.inject(10, seg(".").seq(P).ack(1 + 3 * 1448).win(5000).ts(1001, tsval(last.as_ref().unwrap())));
    for i in 3..6u32 {
        t.expect(10, seg(".").seq(1 + 1448 * i).ack(P).win(65535).ts(ANY, ANY).len(1448));
    }
    t.expect_nothing(19);
}

// ---------------------------------------------------------------------------------------
// 2. Window scale
// ---------------------------------------------------------------------------------------

/// RFC 7323 §2.2-2.3: the SYN-ACK's window is never scaled (65535, not 256 KiB >> 3); after
/// the handshake our window field is the free buffer >> 3, and the peer's field is taken
/// << 7 (23 << 7 = 2944 bytes: exactly two 1448-byte segments, then nothing).
#[test]
fn window_fields_are_scaled_after_the_syn_passive_open() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let (c, synack) = passive_open(&mut t, l, seg("S").win(64240).mss(1460).sack_ok().ts(1000, 0).ws(7), 0, 23);
    assert_eq!((synack.win, synack.ws), (65535, Some(3)), "RFC 7323 §2.2: the SYN-ACK window is not scaled");
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.snd_wscale, info.rcv_wscale), (7, 3));
    assert_eq!(info.snd_wnd, 23 << 7);
    let data = stream(5000, 3);
    t.stack.tcp_send(c, &data).unwrap();
    t.expect(100, seg(".").seq(1).ack(P).win(32768).ts(ANY, ANY).len(1448));
    let s2 = t.expect(100, seg(".").seq(1449).ack(P).win(32768).ts(ANY, ANY).len(1448));
    t.expect_nothing(109);
    // 1000 bytes from the peer (not read): the window field is (262144 - 1000) >> 3. (The
    // connection's first data: acknowledged at once, a quick ACK as Linux's
    // `tcp_event_data_recv` sends it.)
    t.inject(110, seg(".").seq(P).ack(1).win(23).ts(1002, tsval(&s2)).len(1000));
    t.expect(110, seg(".").seq(2897).ack(P + 1000).win(((262_144 - 1000) >> 3) as u16).ts(ANY, 1002));
    // The peer acknowledges both segments with the same scaled window: the rest fits (2944 -
    // 0 in flight), the short tail too (Nagle as refined by Minshall, Linux
    // `tcp_minshall_check`: no short segment is in flight), and the ACKs they carry have the
    // same window.
    t.inject(200, seg(".").seq(P + 1000).ack(2897).win(23).ts(1003, tsval(&s2)));
    t.expect(200, seg(".").seq(2897).ack(P + 1000).win(((262_144 - 1000) >> 3) as u16).ts(ANY, ANY).len(1448));
    t.expect(200, seg("P.").seq(4345).ack(P + 1000).win(((262_144 - 1000) >> 3) as u16).ts(ANY, ANY).len(656));
    t.expect_nothing(250);
}

/// RFC 7323 §2.2: on an active open the SYN-ACK's window (2000) is not scaled, although it
/// carries a shift of 7: one 1448-byte segment fits, the rest waits (sender SWS avoidance).
/// The next window (2000 << 7) is scaled: the rest goes, its short tail too (Nagle as refined
/// by Minshall, Linux `tcp_minshall_check`: no short segment is in flight).
#[test]
fn window_fields_are_scaled_after_the_syn_active_open() {
    let mut t = Script::new(tcp_config());
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let syn = t.expect(0, seg("S").seq(0).win(65535).mss(1460).sack_ok().ts(ANY, 0).ws(3));
    let port = syn.src_port;
    let peer = |s: Seg| s.port(port).peer_port(80);
    t.inject(10, peer(seg("S.").seq(PEER_ISS).ack(1).win(2000).mss(1460).sack_ok().ts(5000, tsval(&syn)).ws(7)));
    t.expect(10, seg(".").seq(1).ack(P).win(32768).ts(ANY, 5000));
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, 2000);
    let data = stream(5000, 4);
    t.stack.tcp_send(c, &data).unwrap();
    let s1 = t.expect(10, seg(".").seq(1).ack(P).win(32768).ts(ANY, 5000).len(1448));
    t.expect_nothing(19);
    t.inject(20, peer(seg(".").seq(P).ack(1449).win(2000).ts(5001, tsval(&s1))));
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, 2000 << 7);
    t.expect(20, seg(".").seq(1449).ack(P).win(32768).ts(ANY, ANY).len(1448));
    t.expect(20, seg(".").seq(2897).ack(P).win(32768).ts(ANY, ANY).len(1448));
    t.expect(20, seg("P.").seq(4345).ack(P).win(32768).ts(ANY, ANY).len(656));
    t.expect_nothing(29);
}

// ---------------------------------------------------------------------------------------
// 3. Timestamps and PAWS
// ---------------------------------------------------------------------------------------

/// RFC 7323 §4.3: TSecr echoes TS.Recent, which takes the TSval of a segment only if it
/// starts at or before Last.ACK.sent. Two segments acknowledged together echo the first
/// one's TSval (case A); an out-of-order segment does not update TS.Recent, and the
/// segment that fills the hole does (case C), even with an older TSval than the one above
/// the hole.
#[test]
fn tsecr_echoes_ts_recent_updated_only_at_last_ack_sent() {
    let (mut t, _c) = established(tcp_config(), seg("S").win(65535).mss(1460).sack_ok().ts(1000, 0));
    t.inject(10, seg("P.").seq(P).ack(1).win(65535).ts(2000, 1).len(100));
    // Starts after Last.ACK.sent (P): its TSval is not recorded.
    t.inject(10, seg("P.").seq(P + 100).ack(1).win(65535).ts(2001, 1).len(100));
    t.expect(10, seg(".").seq(1).ack(P + 200).win(65535).ts(ANY, 2000));
    // Out of order (above Last.ACK.sent = P + 200): acknowledged at once, TSecr unchanged.
    t.inject(20, seg("P.").seq(P + 300).ack(1).win(65535).ts(2003, 1).len(100));
    t.expect(20, seg(".").seq(1).ack(P + 200).win(65535).ts(ANY, 2000).sack(&[(P + 300, P + 400)]));
    // The hole filler starts at Last.ACK.sent: its TSval is echoed.
    t.inject(30, seg("P.").seq(P + 200).ack(1).win(65535).ts(2002, 1).len(100));
    t.expect(30, seg(".").seq(1).ack(P + 400).win(65535).ts(ANY, 2002));
    t.expect_nothing(100);
}

/// RFC 7323 §4.3 (2) and §5.3 R3: *every* arriving segment with SEG.TSval >= TS.Recent and
/// SEG.SEQ <= Last.ACK.sent updates TS.Recent, pure ACKs included (Linux: `tcp_ack` with
/// FLAG_UPDATE_TS_RECENT, and the header-prediction pure-ACK path). Our first data segment
/// must echo the TSval of the handshake's ACK (1001), not of the SYN; a pure ACK of new data
/// (1500) and a pure window update (1600) are echoed likewise.
#[test]
fn ts_recent_is_updated_by_pure_acks() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460).sack_ok().ts(1000, 0));
    t.stack.tcp_send(c, b"first").unwrap();
    let s = t.expect(10, seg("P.").seq(1).ack(P).win(65535).ts(ANY, 1001).len(5));
    t.inject(20, seg(".").seq(P).ack(6).win(65535).ts(1500, tsval(&s)));
    t.stack.tcp_send(c, b"second").unwrap();
    let s = t.expect(30, seg("P.").seq(6).ack(P).win(65535).ts(ANY, 1500).len(6));
    t.inject(40, seg(".").seq(P).ack(12).win(65535).ts(1550, tsval(&s)));
    t.inject(45, seg(".").seq(P).ack(12).win(60000).ts(1600, tsval(&s)));
    t.stack.tcp_send(c, b"third").unwrap();
    t.expect(50, seg("P.").seq(12).ack(P).win(65535).ts(ANY, 1600).len(5));
}

/// RFC 7323 §4 (RTTM) with RFC 6298 §2: the RTT is measured from the echoed TSval. The
/// handshake's ACK 50 ms after our SYN-ACK gives SRTT = 50 ms, RTTVAR = 25 ms; a data segment
/// acknowledged 30 ms later gives SRTT = 7/8·50 + 1/8·30 = 47.5 ms, RTTVAR = 3/4·25 + 1/4·20
/// = 23.75 ms; the RTO is then SRTT + 4·RTTVAR = 142.5 ms, raised to the 200 ms floor.
#[test]
fn rtt_is_measured_from_the_echoed_timestamp() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let (c, _) = passive_open(&mut t, l, seg("S").win(65535).mss(1460).ts(1000, 0), 50, 65535);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.srtt, info.rttvar), (Some(ms(50)), ms(25)));
    t.stack.tcp_send(c, &stream(1000, 5)).unwrap();
    let s = t.expect(60, seg("P.").seq(1).ack(P).win(65535).ts(ANY, ANY).len(1000));
    t.inject(90, seg(".").seq(P).ack(1001).win(65535).ts(1001, tsval(&s)));
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!(info.srtt, Some(Duration::from_micros(47_500)));
    assert_eq!(info.rttvar, Duration::from_micros(23_750));
    assert_eq!(info.rto, ms(200));
}

/// RFC 7323 §5.3 R1: a segment whose TSval is older than TS.Recent is dropped (counted in
/// `drops_paws`) and answered with an ACK; its data is never delivered. The same bytes with
/// a current TSval are then accepted.
#[test]
fn paws_drops_a_segment_with_an_old_timestamp() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460).ts(1000, 0));
    let data = stream(200, 6);
    t.inject_payload(10, seg("P.").seq(P).ack(1).win(65535).ts(5000, 1), &data[..100]);
    t.expect(50, seg(".").seq(1).ack(P + 100).win(65535).ts(ANY, 5000));
    t.inject_payload(100, seg("P.").seq(P + 100).ack(1).win(65535).ts(4000, 1), &data[100..]);
    assert_eq!(t.stack.counters().drops_paws, 1);
    t.expect(100, seg(".").seq(1).ack(P + 100).win(65535).ts(ANY, 5000));
    t.expect_nothing(200);
    assert_eq!(recv_all(&mut t, c), data[..100], "the PAWS-rejected bytes are not delivered");
    t.inject_payload(300, seg("P.").seq(P + 100).ack(1).win(65535).ts(5001, 1), &data[100..]);
    t.expect(340, seg(".").seq(1).ack(P + 200).win(65535).ts(ANY, 5001));
    assert_eq!(recv_all(&mut t, c), data[100..]);
    assert_eq!(t.stack.counters().drops_paws, 1);
}

// ---------------------------------------------------------------------------------------
// 4. SACK and D-SACK generation
// ---------------------------------------------------------------------------------------

/// Segment `k` of 1000-byte peer segments: `[P + 1000k, P + 1000(k+1))`, with timestamps
/// (TSval = 2000 + `ms`, so they never go backwards) or without.
fn kseg(k: u32, ms: u64, ts: bool) -> Seg {
    let s = seg(".").seq(P + 1000 * k).ack(1).win(65535).len(1000);
    if ts {
        s.ts(2000 + ms as u32, 1)
    } else {
        s
    }
}

/// The SACK blocks `[P + 1000a, P + 1000b)`.
fn blocks(b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    b.iter().map(|&(a, e)| (P + 1000 * a, P + 1000 * e)).collect()
}

/// Our ACK of everything below `P + 1000·k`, with these SACK blocks.
fn sack_ack(k: u32, b: &[(u32, u32)], ts: bool) -> Seg {
    let s = seg(".").seq(1).ack(P + 1000 * k).win(65535).sack(&blocks(b));
    if ts {
        s.ts(ANY, ANY)
    } else {
        s
    }
}

/// RFC 2018 §4 and RFC 5681 §4.2: after a hole every out-of-order segment is acknowledged at
/// once; the first SACK block holds the segment that triggered the ACK, the others repeat
/// the most recently reported blocks; at most 3 blocks fit beside the timestamps option.
/// Filling holes merges blocks, and the data is delivered byte-exact.
#[test]
fn sack_reports_newest_block_first_three_with_timestamps() {
    sack_reports_newest_block_first(true);
}

/// As above without timestamps: 4 SACK blocks fit in the 40 option bytes (RFC 2018 §3).
#[test]
fn sack_reports_newest_block_first_four_without_timestamps() {
    sack_reports_newest_block_first(false);
}

fn sack_reports_newest_block_first(ts: bool) {
    let syn = seg("S").win(65535).mss(1460).sack_ok();
    let (mut t, c) = established(tcp_config(), if ts { syn.ts(1000, 0) } else { syn });
    let data = stream(10_000, 7);
    let inject = |t: &mut Script, k: u32, ms: u64| {
        let s = kseg(k, ms, ts);
        t.inject_payload(ms, s, &data[1000 * k as usize..1000 * (k + 1) as usize]);
    };
    inject(&mut t, 1, 10);
    t.expect(10, sack_ack(0, &[(1, 2)], ts));
    inject(&mut t, 3, 20);
    t.expect(20, sack_ack(0, &[(3, 4), (1, 2)], ts));
    inject(&mut t, 5, 30);
    t.expect(30, sack_ack(0, &[(5, 6), (3, 4), (1, 2)], ts));
    inject(&mut t, 7, 40);
    if ts {
        t.expect(40, sack_ack(0, &[(7, 8), (5, 6), (3, 4)], ts));
    } else {
        t.expect(40, sack_ack(0, &[(7, 8), (5, 6), (3, 4), (1, 2)], ts));
    }
    inject(&mut t, 9, 50);
    if ts {
        t.expect(50, sack_ack(0, &[(9, 10), (7, 8), (5, 6)], ts));
    } else {
        t.expect(50, sack_ack(0, &[(9, 10), (7, 8), (5, 6), (3, 4)], ts));
    }
    // Segment 2 joins blocks [1,2) and [3,4): the merged block is reported first.
    inject(&mut t, 2, 60);
    if ts {
        t.expect(60, sack_ack(0, &[(1, 4), (9, 10), (7, 8)], ts));
    } else {
        t.expect(60, sack_ack(0, &[(1, 4), (9, 10), (7, 8), (5, 6)], ts));
    }
    // Segment 8 joins [7,8) and [9,10).
    inject(&mut t, 8, 70);
    t.expect(70, sack_ack(0, &[(7, 10), (1, 4), (5, 6)], ts));
    // Segment 0 fills the first hole: cumulative ACK to 4, at once (RFC 5681 §4.2).
    inject(&mut t, 0, 80);
    t.expect(80, sack_ack(4, &[(7, 10), (5, 6)], ts));
    inject(&mut t, 4, 90);
    t.expect(90, sack_ack(6, &[(7, 10)], ts));
    inject(&mut t, 6, 100);
    t.expect(100, sack_ack(10, &[], ts));
    t.expect_nothing(300);
    assert_eq!(recv_all(&mut t, c), data);
}

/// RFC 2883 §4: a duplicate segment is reported in a D-SACK block, first in the option:
/// (1) a duplicate below the cumulative ACK, (2) a duplicate of out-of-order data, followed
/// by the block that contains it (rule 4), and (3) the duplicated part of a segment that
/// straddles the cumulative ACK. A D-SACK block is reported once.
#[test]
fn dsack_reports_duplicates() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460).sack_ok().ts(1000, 0));
    let data = stream(8000, 8);
    let chunk = |a: u32, b: u32| &data[(a - P) as usize..(b - P) as usize];
    t.inject_payload(10, kseg(0, 10, true), chunk(P, P + 1000));
    t.expect(50, sack_ack(1, &[], true));
    // (1) Segment 0 again: below rcv_nxt.
    t.inject_payload(100, kseg(0, 100, true), chunk(P, P + 1000));
    t.expect(100, sack_ack(1, &[(0, 1)], true));
    t.inject_payload(110, kseg(2, 110, true), chunk(P + 2000, P + 3000));
    t.expect(110, sack_ack(1, &[(2, 3)], true));
    t.inject_payload(120, kseg(4, 120, true), chunk(P + 4000, P + 5000));
    t.expect(120, sack_ack(1, &[(4, 5), (2, 3)], true));
    // (2) Segment 2 again: out-of-order data already held; its block follows the D-SACK.
    t.inject_payload(130, kseg(2, 130, true), chunk(P + 2000, P + 3000));
    t.expect(130, sack_ack(1, &[(2, 3), (2, 3), (4, 5)], true));
    // The next ACK does not repeat the D-SACK block.
    t.inject_payload(140, kseg(6, 140, true), chunk(P + 6000, P + 7000));
    t.expect(140, sack_ack(1, &[(6, 7), (2, 3), (4, 5)], true));
    // (3) [P+500, P+1500): the first half is a duplicate, the second half is new in-order data.
    let s = seg(".").seq(P + 500).ack(1).win(65535).ts(2150, 1).len(1000);
    t.inject_payload(150, s, chunk(P + 500, P + 1500));
    t.expect(
        150,
        seg(".").seq(1).ack(P + 1500).win(65535).ts(ANY, ANY).sack(&[
            (P + 500, P + 1000),
            (P + 6000, P + 7000),
            (P + 2000, P + 3000),
        ]),
    );
    assert_eq!(recv_all(&mut t, c), data[..1500]);
}

// ---------------------------------------------------------------------------------------
// 5. Out-of-order queue
// ---------------------------------------------------------------------------------------

/// RFC 9293 §3.10.7.4 and RFC 5681 §4.2: segments above three holes are held; each is
/// acknowledged at once (a duplicate ACK, no SACK here); each hole fill is acknowledged at
/// once with the new cumulative ACK; `tcp_recv` returns exactly the in-order bytes, byte
/// for byte, and nothing above a hole. With a 65535-byte buffer every window is exact: held
/// data shrinks the free space, but the right edge never moves left (RFC 9293 §3.8.6.2.2),
/// and it moves right by at least an MSS at a time.
#[test]
fn out_of_order_segments_are_held_and_delivered_in_order() {
    let cfg = TcpConfig { recv_buffer: 65535, ..tcp_config() };
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    assert_eq!(t.log[0].win, 65535);
    let data = stream(6000, 9);
    let inject = |t: &mut Script, k: u32, ms: u64| {
        t.inject_payload(ms, kseg(k, ms, false), &data[1000 * k as usize..1000 * (k + 1) as usize]);
    };
    let ack = |k: u32, win: u16| seg(".").seq(1).ack(P + 1000 * k).win(win);
    // Right edge P + 65535 (the SYN-ACK's): the free space shrinks, the edge stays.
    for (k, ms) in [(1, 10), (3, 20), (5, 30)] {
        inject(&mut t, k, ms);
        t.expect(ms, ack(0, 65535));
        assert_eq!(recv_all(&mut t, c), b"", "nothing above a hole is readable");
    }
    inject(&mut t, 0, 40);
    t.expect(40, ack(2, 65535 - 2000));
    assert_eq!(recv_all(&mut t, c), data[..2000]);
    // Reading 2000 bytes only brings the free space back to the advertised edge: no update.
    t.expect_nothing(45);
    inject(&mut t, 4, 50);
    t.expect(50, ack(2, 65535 - 2000));
    assert_eq!(recv_all(&mut t, c), b"");
    // Segment 2 fills the last hole: 4000 bytes queued, right edge P + 6000 + 61535.
    inject(&mut t, 2, 60);
    t.expect(60, ack(6, 65535 - 4000));
    assert_eq!(recv_all(&mut t, c), data[2000..]);
    // Reading 4000 bytes opens the window by more than 2 MSS: a window update.
    t.expect(61, ack(6, 65535));
    t.expect_nothing(300);
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.ooo_segs, 4);
}

// ---------------------------------------------------------------------------------------
// 6. Delayed ACK
// ---------------------------------------------------------------------------------------

/// RFC 5681 §4.2, RFC 9293 §3.8.6.3: one full-sized segment is acknowledged after the
/// delayed-ACK time (40 ms, `TcpConfig::delayed_ack`), not before; a second full-sized
/// segment before then draws the ACK at once; two segments in one receive batch draw a
/// single ACK covering both. (Quick ACKs, which acknowledge a connection's first segments
/// at once, are off: the subject is the delayed-ACK rule itself.)
#[test]
fn delayed_ack_after_40_ms_or_every_second_segment() {
    let no_quick = TcpConfig { quick_acks: false, ..tcp_config() };
    let (mut t, _c) = established(no_quick.clone(), seg("S").win(65535).mss(1460));
    let full = |i: u32| seg(".").seq(P + 1460 * i).ack(1).win(65535).len(1460);
    t.inject(10, full(0));
    t.expect_nothing(49);
    t.expect(50, seg(".").seq(1).ack(P + 1460).win(65535));
    t.expect_nothing(99);
    // Two segments back to back, one ACK for both.
    t.inject(100, full(1));
    t.inject(100, full(2));
    t.expect(100, seg(".").seq(1).ack(P + 3 * 1460).win(65535));
    t.expect_nothing(200);
    // A second segment 20 ms after the first: ACK at once, and the timer is stopped.
    t.inject(300, full(3));
    t.expect_nothing(319);
    t.inject(320, full(4));
    t.expect(320, seg(".").seq(1).ack(P + 5 * 1460).win(65535));
    t.expect_nothing(500);
    // A configured delay is honoured.
    let cfg = TcpConfig { delayed_ack: ms(200), ..no_quick };
    let (mut t, _c) = established(cfg, seg("S").win(65535).mss(1460));
    t.inject(10, full(0));
    t.expect_nothing(209);
    t.expect(210, seg(".").seq(1).ack(P + 1460).win(65535));
}

// ---------------------------------------------------------------------------------------
// 7. Window updates and receiver SWS avoidance
// ---------------------------------------------------------------------------------------

/// RFC 9293 §3.8.6.2.2 (receiver SWS avoidance) and BSD's window-update rule, with an
/// 8192-byte receive buffer: filling it closes the window; a zero-window probe is answered
/// with window 0 and its byte refused; reading less than 2 MSS (and less than half the
/// buffer) sends no update, reading 3000 bytes sends one (window 3000). Afterwards the right
/// edge moves only by min(buffer/2, MSS) = 1460 bytes or more, and never to the left.
#[test]
fn window_update_after_the_application_reads() {
    let cfg = TcpConfig { recv_buffer: 8192, ..tcp_config() };
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    assert_eq!(t.log[0].win, 8192, "the SYN-ACK offers the whole buffer");
    let data = stream(8392, 10);
    let mut off = 0usize;
    let mut send = |t: &mut Script, ms: u64, len: usize| {
        t.inject_payload(ms, seg(".").seq(P + off as u32).ack(1).win(65535).len(len), &data[off..off + len]);
        off += len;
    };
    send(&mut t, 10, 1460);
    send(&mut t, 10, 1460);
    t.expect(10, seg(".").seq(1).ack(P + 2920).win(8192 - 2920));
    send(&mut t, 20, 1460);
    send(&mut t, 20, 1460);
    t.expect(20, seg(".").seq(1).ack(P + 5840).win(8192 - 5840));
    send(&mut t, 30, 1460);
    send(&mut t, 30, 892);
    t.expect(30, seg(".").seq(1).ack(P + 8192).win(0));
    // A zero-window probe carrying one byte: answered, the byte is not taken.
    t.inject(40, seg(".").seq(P + 8192).ack(1).win(65535).len(1));
    t.expect(40, seg(".").seq(1).ack(P + 8192).win(0));
    let mut buf = vec![0u8; 8192];
    assert_eq!(t.stack.tcp_recv(c, &mut buf[..2000]), Ok(2000));
    t.expect_nothing(59);
    assert_eq!(t.stack.tcp_recv(c, &mut buf[2000..3000]), Ok(1000));
    t.expect(60, seg(".").seq(1).ack(P + 8192).win(3000));
    // Right edge now P + 11192. Reading 1000 more does not move it (1000 < 1460)...
    assert_eq!(t.stack.tcp_recv(c, &mut buf[3000..4000]), Ok(1000));
    t.expect_nothing(99);
    send(&mut t, 100, 100);
    t.expect_nothing(139);
    t.expect(140, seg(".").seq(1).ack(P + 8292).win(11192 - 8292));
    // ...reading 500 more makes it 1500 >= 1460: the next ACK moves the edge (but 1500 < 2 MSS
    // was not worth an update of its own).
    assert_eq!(t.stack.tcp_recv(c, &mut buf[4000..4500]), Ok(500));
    t.expect_nothing(199);
    send(&mut t, 200, 100);
    t.expect(240, seg(".").seq(1).ack(P + 8392).win(8192 - (8392 - 4500) as u16));
    let mut got = buf[..4500].to_vec();
    got.extend(recv_all(&mut t, c));
    assert_eq!(got, data);
}

/// BSD `tcp_output` (RFC 9293 §3.8.6.2.2): a window update is worth sending only if the
/// advertised window can actually grow. Without window scaling the field is capped at
/// 65535; with a 256 KiB buffer reading data cannot raise it, so a read must send nothing.
/// (An ACK repeating the same ACK number and window is a duplicate ACK to the peer, RFC 5681
/// §2: three reads would trigger a spurious fast retransmit.)
#[test]
fn no_window_update_when_the_window_field_cannot_grow() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460));
    t.inject(10, seg(".").seq(P).ack(1).win(65535).len(1460));
    t.inject(10, seg(".").seq(P + 1460).ack(1).win(65535).len(1460));
    t.expect(10, seg(".").seq(1).ack(P + 2920).win(65535));
    let mut buf = [0u8; 1000];
    for ms in [20, 30, 40] {
        at(&mut t, ms);
        assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(if ms == 40 { 920 } else { 1000 }));
        t.expect_nothing(ms + 5);
    }
}

// ---------------------------------------------------------------------------------------
// 8. Nagle and sender SWS avoidance
// ---------------------------------------------------------------------------------------

/// RFC 9293 §3.7.4 (Nagle) as refined by Minshall (Linux `tcp_minshall_check`): a short
/// segment waits while a short segment sent before is unacknowledged, collecting later
/// writes; a full-sized segment is never held; the short one goes when the short one before
/// it is acknowledged, although a full-sized segment sent after that is not.
#[test]
fn nagle_holds_short_segments_while_a_short_segment_is_unacknowledged() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460));
    let data = stream(1860, 11);
    t.stack.tcp_send(c, &data[..100]).unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(100));
    t.stack.tcp_send(c, &data[100..200]).unwrap();
    t.expect_nothing(11);
    t.stack.tcp_send(c, &data[200..300]).unwrap();
    t.expect_nothing(12);
    t.inject(50, seg(".").seq(P).ack(101).win(65535));
    let s = t.expect(50, seg("P.").seq(101).ack(P).win(65535).len(200));
    assert_eq!(s.payload, data[100..300]);
    // A full-sized segment goes at once although 200 bytes are unacknowledged.
    t.stack.tcp_send(c, &data[300..1760]).unwrap();
    t.expect(60, seg("P.").seq(301).ack(P).win(65535).len(1460));
    t.stack.tcp_send(c, &data[1760..]).unwrap();
    t.expect_nothing(61);
    t.inject(100, seg(".").seq(P).ack(301).win(65535));
    t.expect(100, seg("P.").seq(1761).ack(P).win(65535).len(100));
    t.inject(110, seg(".").seq(P).ack(1761).win(65535));
    t.expect_nothing(150);
}

/// RFC 9293 §3.7.4: Nagle off (`SocketOptions::nodelay` on the listener, or
/// `TcpConfig::nodelay` for an active open) sends each short write at once.
#[test]
fn nodelay_sends_short_segments_at_once() {
    let mut t = Script::new(tcp_config());
    let opts = SocketOptions { nodelay: true, ..SocketOptions::from_config(&tcp_config()) };
    let l = t.stack.tcp_listen_with(SocketAddrV4::new(LOCAL, 8080), 8, opts).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, b"one").unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(3));
    t.stack.tcp_send(c, b"two").unwrap();
    t.expect(11, seg("P.").seq(4).ack(P).win(65535).len(3));

    let mut t = Script::new(TcpConfig { nodelay: true, ..tcp_config() });
    let c = t.stack.tcp_connect(SocketAddrV4::new(PEER, 80)).unwrap();
    let syn = t.expect(0, seg("S").seq(0).any_options());
    let peer = |s: Seg| s.port(syn.src_port).peer_port(80);
    t.inject(10, peer(seg("S.").seq(PEER_ISS).ack(1).win(65535).mss(1460)));
    t.expect(10, seg(".").seq(1).ack(P).win(65535));
    t.stack.tcp_send(c, b"one").unwrap();
    t.expect(20, seg("P.").seq(1).ack(P).win(65535).len(3));
    t.stack.tcp_send(c, b"two").unwrap();
    t.expect(21, seg("P.").seq(4).ack(P).win(65535).len(3));
}

/// Sets up RFC 9293 §3.8.6.2.1's case: the peer's largest window was 10000 bytes, and it
/// now offers 1000 (less than an MSS, less than half of 10000) with nothing in flight and
/// one full segment queued. Returns at 20 ms, with RTO 200 ms.
fn small_peer_window() -> (Script, TcpHandle, Vec<u8>) {
    let (mut t, c) = established(tcp_config(), seg("S").win(10000).mss(1460));
    let data = stream(7 * 1460, 12);
    t.stack.tcp_send(c, &data).unwrap();
    for i in 0..6u32 {
        t.expect(10, seg(".").seq(1 + 1460 * i).ack(P).win(65535).len(1460));
    }
    t.expect_nothing(19);
    t.inject(20, seg(".").seq(P).ack(8761).win(1000));
    t.expect_nothing(20);
    assert_eq!(t.stack.tcp_info(c).unwrap().rto, ms(200));
    (t, c, data)
}

/// RFC 9293 §3.8.6.2.1 (sender SWS avoidance): with a usable window smaller than an MSS and
/// than half the peer's largest window, nothing is sent (before the override timer).
#[test]
fn sender_sws_avoidance_sends_no_runt_into_a_small_window() {
    let (mut t, _c, _) = small_peer_window();
    t.expect_nothing(219);
}

/// RFC 9293 §3.8.6.2.1: the sender holding data for SWS avoidance must run a timer ("the
/// override timeout") and send what the window takes when it expires; BSD and Linux use the
/// persist timer whenever data waits and nothing is in flight, whatever the window. Without
/// it the connection stalls for good if the peer never opens its window further.
#[test]
fn persist_timer_sends_into_a_window_too_small_for_sws() {
    let (mut t, _c, data) = small_peer_window();
    t.expect_nothing(219);
    let s = t.expect(220, seg(".").seq(8761).ack(P).win(65535).len(1000));
    assert_eq!(s.payload, data[8760..9760]);
    // The peer then opens its window: the rest (460 bytes) goes.
    t.inject(230, seg(".").seq(P).ack(9761).win(10000));
    let s = t.expect(230, seg("P.").seq(9761).ack(P).win(65535).len(460));
    assert_eq!(s.payload, data[9760..]);
}

// ---------------------------------------------------------------------------------------
// 9. Zero window and persist
// ---------------------------------------------------------------------------------------

/// The connection of the persist tests: no timestamps, RTO 200 ms; the peer closes its
/// window at 5 ms and 1000 bytes are queued at 10 ms.
fn zero_window(cfg: TcpConfig) -> (Script, TcpHandle, Vec<u8>) {
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    t.inject(5, seg(".").seq(P).ack(1).win(0));
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, 0);
    let data = stream(1000, 13);
    at(&mut t, 10);
    t.stack.tcp_send(c, &data).unwrap();
    t.expect_nothing(10);
    assert_eq!(t.stack.tcp_info(c).unwrap().rto, ms(200));
    (t, c, data)
}

/// A window probe: `<SEQ=SND.UNA-1><ACK=RCV.NXT>`, no data (Linux `tcp_xmit_probe_skb`).
fn probe() -> Seg {
    seg(".").seq(0).ack(P).win(65535)
}

/// RFC 9293 §3.8.6.1, RFC 6298 §5.5: with the peer's window at zero and data queued, probes
/// start one RTO after the window closed on us and back off 2x per probe answered with a
/// zero window, up to the 60 s maximum; the answer that opens the window lets the data go.
#[test]
fn zero_window_probes_back_off_until_the_window_opens() {
    let (mut t, c, data) = zero_window(tcp_config());
    let mut when = 10;
    for interval in [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 60000, 60000] {
        t.expect_nothing(when + interval - 1);
        when += interval;
        t.expect(when, probe());
        t.inject(when, seg(".").seq(P).ack(1).win(0));
        t.expect_nothing(when);
    }
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.window_probes, 11);
    t.inject(when + 1, seg(".").seq(P).ack(1).win(65535));
    let s = t.expect(when + 1, seg("P.").seq(1).ack(P).win(65535).len(1000));
    assert_eq!(s.payload, data);
}

/// RFC 9293 §3.8.6.1 and RFC 1122 §4.2.2.17 (probe a zero window so that a lost window
/// update cannot deadlock the connection; lwIP bug #49533 is the classic failure): the
/// peer's window update is lost (never injected); the next probe draws the open window and
/// the transfer completes.
#[test]
fn lost_window_update_is_recovered_by_the_next_probe() {
    let (mut t, _c, data) = zero_window(tcp_config());
    t.expect(210, probe());
    t.inject(210, seg(".").seq(P).ack(1).win(0));
    // At 300 ms the peer opens its window; that ACK is lost.
    t.expect_nothing(609);
    t.expect(610, probe());
    t.inject(610, seg(".").seq(P).ack(1).win(65535));
    let s = t.expect(610, seg("P.").seq(1).ack(P).win(65535).len(1000));
    assert_eq!(s.payload, data);
    t.inject(620, seg(".").seq(P).ack(1001).win(65535));
    t.expect_nothing(2000);
}

/// RFC 9293 §3.8.6.1 (RFC 1122 §4.2.2.17 MUST): a receiver may keep its window closed
/// indefinitely; as long as probes are answered the connection stays open. Ten minutes of
/// answered probes, with `max_retries` = 3, never abort it; probes keep coming every 60 s.
#[test]
fn zero_window_probing_never_aborts_while_answered() {
    let (mut t, c, _) = zero_window(TcpConfig { max_retries: 3, ..tcp_config() });
    let mut times = vec![];
    while t.ms() < 600_000 {
        let next = t.ms() + 1;
        for (when, s) in t.run_to(next) {
            check_probe(when, &s);
            times.push(when);
            t.inject(when, seg(".").seq(P).ack(1).win(0));
        }
    }
    assert_eq!(times[..3], [210, 610, 1410]);
    assert!(times.windows(2).all(|w| w[1] - w[0] <= 60_000), "probe intervals are bounded: {times:?}");
    assert!(*times.last().unwrap() > 540_000, "still probing at the end: {times:?}");
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error), (State::Established, None));
}

#[track_caller]
fn check_probe(when: u64, s: &Sent) {
    let want = probe();
    assert_eq!(
        (s.flags, s.seq, s.ack, s.win, s.len),
        (want.flags, 0, P, 65535, 0),
        "at {when} ms: a window probe, got {s:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 10. Retransmission timeout
// ---------------------------------------------------------------------------------------

/// RFC 6298 §2.4-2.5 and §5.5: after the handshake's RTT sample (0 ms here) the RTO is the
/// 200 ms floor (`RttConfig::min_rto`); each expiry retransmits the same bytes and doubles
/// the RTO, up to 60 s. Retransmission re-sends the queued pbuf: nothing is copied.
#[test]
fn rto_doubles_up_to_sixty_seconds_and_resends_the_same_bytes() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460));
    assert_eq!(t.stack.tcp_info(c).unwrap().rto, ms(200));
    let data = stream(1460, 14);
    t.stack.tcp_send(c, &data).unwrap();
    let first = t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(1460));
    assert_eq!(first.payload, data);
    let mut when = 10;
    for rto in [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 60000, 60000] {
        t.expect_nothing(when + rto - 1);
        when += rto;
        let s = t.expect(when, seg("P.").seq(1).ack(P).win(65535).len(1460));
        assert_eq!(s.payload, first.payload, "retransmission at {when} ms");
    }
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.retransmits, 11);
    t.inject(when + 10, seg(".").seq(P).ack(1461).win(65535));
    t.expect_nothing(when + 200_000);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().state, State::Established);
    assert_eq!(t.stack.counters().tx_copies, 0, "retransmissions re-send the queued pbuf");
}

/// RFC 9293 §3.10.7.4 and BSD's `tcp_output`: a pure ACK carries SND.MAX, not SND.NXT. After
/// a timeout SND.NXT is back at SND.UNA while the peer may hold everything up to SND.MAX; an
/// ACK at SND.NXT would lie below the peer's RCV.NXT, be unacceptable there and be dropped
/// unread. (Two ends that both timed out would then never learn what the other received.)
#[test]
fn a_pure_ack_after_a_timeout_carries_snd_max() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, &stream(3 * 1460, 16)).unwrap();
    t.at_us(10_000);
    t.discard();
    // The RTO (200 ms floor) resends the first segment only: SND.NXT = 1461, SND.MAX = 4381.
    t.expect(210, seg(".").seq(1).ack(P).win(65535).len(1460));
    t.expect_nothing(211);
    // The peer sends data without acknowledging ours: the ACK for it goes alone.
    t.inject(220, seg("P.").seq(P).ack(1).win(65535).len(100));
    t.expect(220, seg(".").seq(4381).ack(P + 100).win(65535));
}

/// RFC 6298 §2.2-2.3: after a measured RTT, RTO = SRTT + max(G, 4·RTTVAR). A handshake RTT
/// of 100 ms gives SRTT 100, RTTVAR 50, RTO 300 ms; the data is retransmitted 300 ms after
/// it was sent, then 600 ms later.
#[test]
fn rto_is_srtt_plus_four_rttvar() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let (c, _) = passive_open(&mut t, l, seg("S").win(65535).mss(1460).ts(1000, 0), 100, 65535);
    let info = t.stack.tcp_info(c).unwrap();
    assert_eq!((info.srtt, info.rttvar, info.rto), (Some(ms(100)), ms(50), ms(300)));
    t.stack.tcp_send(c, &stream(1448, 15)).unwrap();
    t.expect(100, seg("P.").seq(1).ack(P).win(65535).ts(ANY, ANY).len(1448));
    t.expect_nothing(399);
    t.expect(400, seg("P.").seq(1).ack(P).win(65535).ts(ANY, ANY).len(1448));
    t.expect_nothing(999);
    t.expect(1000, seg("P.").seq(1).ack(P).win(65535).ts(ANY, ANY).len(1448));
}

/// RFC 6298 §2.4: with the RFC's 1 s minimum (`RttConfig::min_rto`) the 300 ms computed
/// RTO is raised to 1 s.
#[test]
fn rto_floor_is_configurable_to_rfc6298_one_second() {
    let rtt = ackclock::tcp::rtt::RttConfig { min_rto: ms(1000), ..Default::default() };
    let mut t = Script::new(TcpConfig { rtt, ..tcp_config() });
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let (c, _) = passive_open(&mut t, l, seg("S").win(65535).mss(1460).ts(1000, 0), 100, 65535);
    assert_eq!(t.stack.tcp_info(c).unwrap().rto, ms(1000));
    t.stack.tcp_send(c, &stream(1448, 16)).unwrap();
    t.expect(100, seg("P.").seq(1).ack(P).win(65535).ts(ANY, ANY).len(1448));
    t.expect_nothing(1099);
    t.expect(1100, seg("P.").seq(1).ack(P).win(65535).ts(ANY, ANY).len(1448));
    t.expect_nothing(3099);
    t.expect(3100, seg("P.").seq(1).ack(P).win(65535).ts(ANY, ANY).len(1448));
}

/// RFC 6298 §5.4: on expiry the earliest unacknowledged segment is retransmitted, whatever
/// its size. Nagle (RFC 9293 §3.7.4) governs when *new* data may be sent; it must not hold
/// back the retransmission of a short segment (Linux `tcp_retransmit_skb` never applies it).
#[test]
fn short_segment_is_retransmitted_on_timeout() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, b"hello").unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(5));
    t.expect_nothing(209);
    let s = t.expect(210, seg("P.").seq(1).ack(P).win(65535).len(5));
    assert_eq!(s.payload, b"hello");
    t.expect_nothing(609);
    t.expect(610, seg("P.").seq(1).ack(P).win(65535).len(5));
}

/// RFC 6298 §5.7 (MUST): when the timer expired awaiting the ACK of a SYN (here our SYN-ACK)
/// and no RTT sample was taken, the RTO is re-initialised to 3 s when data transmission
/// begins (Linux `tcp_init_metrics`: TCP_TIMEOUT_FALLBACK).
#[test]
fn rto_is_three_seconds_after_a_retransmitted_synack() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(1460));
    t.expect(1000, seg("S.").seq(0).ack(P).win(65535).mss(1460));
    t.inject(1010, seg(".").seq(P).ack(1).win(65535));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_info(c).unwrap().srtt, None, "Karn: no sample from a retransmitted SYN-ACK");
    t.stack.tcp_send(c, &stream(1460, 21)).unwrap();
    t.expect(1010, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect_nothing(4009);
    t.expect(4010, seg("P.").seq(1).ack(P).win(65535).len(1460));
}

// ---------------------------------------------------------------------------------------
// 11. Karn's rule
// ---------------------------------------------------------------------------------------

/// RFC 6298 §3 (Karn): without timestamps, the ACK of a retransmitted segment is ambiguous
/// and gives no RTT sample: SRTT stays at the handshake's 50 ms. A segment sent once then
/// gives a sample again (30 ms: SRTT = 7/8·50 + 1/8·30 = 47.5 ms).
#[test]
fn karn_ack_of_a_retransmission_gives_no_rtt_sample() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let (c, _) = passive_open(&mut t, l, seg("S").win(65535).mss(1460), 50, 65535);
    assert_eq!(t.stack.tcp_info(c).unwrap().srtt, Some(ms(50)));
    assert_eq!(t.stack.tcp_info(c).unwrap().rto, ms(200));
    t.stack.tcp_send(c, &stream(1460, 17)).unwrap();
    t.expect(50, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect(250, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.inject(260, seg(".").seq(P).ack(1461).win(65535));
    assert_eq!(t.stack.tcp_info(c).unwrap().srtt, Some(ms(50)), "no sample from a retransmitted segment");
    t.stack.tcp_send(c, &stream(1460, 18)).unwrap();
    t.expect(300, seg("P.").seq(1461).ack(P).win(65535).len(1460));
    t.inject(330, seg(".").seq(P).ack(2921).win(65535));
    assert_eq!(t.stack.tcp_info(c).unwrap().srtt, Some(Duration::from_micros(47_500)));
}

/// RFC 6298 §3 (Karn), first sample: a retransmitted SYN-ACK gives no sample, and neither
/// does the ACK of retransmitted data: SRTT stays unset; the first segment acknowledged
/// without a retransmission sets it (20 ms).
#[test]
fn karn_no_sample_before_an_unambiguous_ack() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    t.inject(0, seg("S").seq(PEER_ISS).win(65535).mss(1460));
    t.expect(0, seg("S.").seq(0).ack(P).win(65535).mss(1460));
    t.expect(1000, seg("S.").seq(0).ack(P).win(65535).mss(1460));
    t.inject(1010, seg(".").seq(P).ack(1).win(65535));
    let c = t.stack.tcp_accept(l).unwrap();
    assert_eq!(t.stack.tcp_info(c).unwrap().srtt, None);
    t.stack.tcp_send(c, &stream(1460, 19)).unwrap();
    t.expect(1010, seg("P.").seq(1).ack(P).win(65535).len(1460));
    // The retransmission comes after the RTO (whatever it is here); the ACK follows 10 ms
    // later, which would be a 10 ms sample if (wrongly) taken.
    let (when, sent) = run_until_sent(&mut t, 20_000);
    assert_eq!((sent.len(), sent[0].seq, sent[0].len), (1, 1, 1460), "the retransmission: {sent:?}");
    t.inject(when + 10, seg(".").seq(P).ack(1461).win(65535));
    assert_eq!(t.stack.tcp_info(c).unwrap().srtt, None, "no sample from a retransmitted segment");
    t.stack.tcp_send(c, &stream(1460, 20)).unwrap();
    t.expect(when + 20, seg("P.").seq(1461).ack(P).win(65535).len(1460));
    t.inject(when + 40, seg(".").seq(P).ack(2921).win(65535));
    assert_eq!(t.stack.tcp_info(c).unwrap().srtt, Some(ms(20)));
}

/// RFC 6298 §3 ("The only case when TCP can safely take RTT samples from retransmitted
/// segments is when the TCP timestamp option is employed") with RFC 7323 §4 (RTTM: the RTT
/// is now minus the echoed TSecr): a retransmission carries a new TSval, so the echo says
/// which transmission the ACK answers. The handshake gives SRTT 50 ms, RTTVAR 25 ms; the
/// segment is sent at 50 ms and retransmitted at 250 ms; the ACK comes at 260 ms.
/// - Echoing the retransmission's TSval: a 10 ms sample, SRTT = 7/8·50 + 1/8·10 = 45 ms,
///   RTTVAR = 3/4·25 + 1/4·40 = 28.75 ms.
/// - Echoing the original's TSval (the first copy was only late): a 210 ms sample,
///   SRTT = 7/8·50 + 1/8·210 = 70 ms, RTTVAR = 3/4·25 + 1/4·160 = 58.75 ms.
#[test]
fn karn_with_timestamps_samples_the_transmission_the_ack_echoes() {
    for echo_retransmission in [true, false] {
        let mut t = Script::new(tcp_config());
        let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
        let (c, _) = passive_open(&mut t, l, seg("S").win(65535).mss(1460).ts(1000, 0), 50, 65535);
        let info = t.stack.tcp_info(c).unwrap();
        assert_eq!((info.srtt, info.rttvar, info.rto), (Some(ms(50)), ms(25), ms(200)));
        t.stack.tcp_send(c, &stream(1448, 30)).unwrap();
        let first = t.expect(50, seg("P.").seq(1).ack(P).win(65535).ts(ANY, 1001).len(1448));
        t.expect_nothing(249);
        let again = t.expect(250, seg("P.").seq(1).ack(P).win(65535).ts(ANY, 1001).len(1448));
        assert_eq!(tsval(&again), tsval(&first).wrapping_add(200), "the retransmission's own TSval");
        let echo = if echo_retransmission { tsval(&again) } else { tsval(&first) };
        t.inject(260, seg(".").seq(P).ack(1449).win(65535).ts(1002, echo));
        let info = t.stack.tcp_info(c).unwrap();
        let (srtt, rttvar) = if echo_retransmission { (45_000, 28_750) } else { (70_000, 58_750) };
        assert_eq!(
            (info.srtt, info.rttvar),
            (Some(Duration::from_micros(srtt)), Duration::from_micros(rttvar)),
            "echoing the {} TSval",
            if echo_retransmission { "retransmission's" } else { "original's" }
        );
        assert_eq!(info.stats.retransmits, 1);
    }
}

// ---------------------------------------------------------------------------------------
// 12. Giving up
// ---------------------------------------------------------------------------------------

/// RFC 9293 §3.8.3 (R2) with `max_retries` = 3: three retransmissions, and at the fourth
/// expiry the connection is aborted (nothing sent, as Linux) with `Error::TimedOut`.
#[test]
fn retransmissions_give_up_after_max_retries() {
    let (mut t, c) = established(TcpConfig { max_retries: 3, ..tcp_config() }, seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, &stream(1460, 21)).unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(1460));
    for when in [210, 610, 1410] {
        t.expect(when, seg("P.").seq(1).ack(P).win(65535).len(1460));
    }
    t.expect_nothing(3009);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().state, State::Established);
    t.expect_nothing(3010);
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error, r.readable), (State::Closed, Some(Error::TimedOut), true));
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 8]), Err(Error::TimedOut));
    assert_eq!(t.stack.tcp_send(c, b"more"), Err(Error::TimedOut));
    t.expect_nothing(200_000);
}

/// RFC 5482 / RFC 9293 §3.10.8 (USER TIMEOUT): with a 1400 ms user timeout and 15 retries
/// allowed, the connection is aborted 1400 ms after the data was first sent.
#[test]
fn user_timeout_aborts_with_retries_left() {
    let cfg = TcpConfig { user_timeout: Some(ms(1400)), ..tcp_config() };
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, &stream(1460, 21)).unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect(210, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect(610, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect_nothing(1409);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None);
    t.expect_nothing(1410);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(Error::TimedOut));
    assert_eq!(t.stack.tcp_send(c, b"more"), Err(Error::TimedOut));
}

/// RFC 9293 §3.10.8: "if a user timeout expires" the connection is aborted then, not at the
/// next retransmission timer (Linux clamps the RTO to the time left,
/// `tcp_clamp_rto_to_user_timeout`). Data sent at 10 ms with a 1000 ms user timeout: aborted
/// at 1010 ms, not at the third expiry (1410 ms).
#[test]
fn user_timeout_aborts_when_it_expires() {
    let cfg = TcpConfig { user_timeout: Some(ms(1000)), ..tcp_config() };
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, &stream(1460, 21)).unwrap();
    t.expect(10, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect(210, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect(610, seg("P.").seq(1).ack(P).win(65535).len(1460));
    t.expect_nothing(1009);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None);
    t.expect_nothing(1010);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(Error::TimedOut));
}

// ---------------------------------------------------------------------------------------
// 13. Keep-alive
// ---------------------------------------------------------------------------------------

fn keepalive_opts() -> SocketOptions {
    let ka = KeepAlive { idle: ms(10_000), interval: ms(2_000), count: 3 };
    SocketOptions { keepalive: Some(ka), ..SocketOptions::from_config(&tcp_config()) }
}

/// A keep-alive probe: `<SEQ=SND.UNA-1><ACK=RCV.NXT>`, no data (RFC 9293 §3.8.4, Linux).
fn keepalive_probe() -> Seg {
    seg(".").seq(0).ack(P).win(65535)
}

/// RFC 9293 §3.8.4 (RFC 1122 §4.2.3.6): keep-alive on (idle 10 s, interval 2 s, count 3):
/// the first probe after 10 s idle, then one every 2 s; three unanswered probes end the
/// connection with `Error::TimedOut` at 10 + 3·2 s.
#[test]
fn keepalive_probes_then_times_out() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen_with(SocketAddrV4::new(LOCAL, 8080), 8, keepalive_opts()).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    t.expect_nothing(9_999);
    t.expect(10_000, keepalive_probe());
    t.expect_nothing(11_999);
    t.expect(12_000, keepalive_probe());
    t.expect_nothing(13_999);
    t.expect(14_000, keepalive_probe());
    t.expect_nothing(15_999);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None);
    t.expect_nothing(16_000);
    let r = t.stack.tcp_readiness(c).unwrap();
    assert_eq!((r.state, r.error), (State::Closed, Some(Error::TimedOut)));
}

/// RFC 9293 §3.8.4: an answered probe resets the count and the idle timer: the next probe
/// comes `idle` after the answer. Set through `TcpConfig::keepalive` here.
#[test]
fn answered_keepalive_probe_resets_the_idle_timer() {
    let cfg = TcpConfig { keepalive: keepalive_opts().keepalive, ..tcp_config() };
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    t.expect(10_000, keepalive_probe());
    t.inject(10_005, seg(".").seq(P).ack(1).win(65535));
    t.expect_nothing(20_004);
    t.expect(20_005, keepalive_probe());
    t.inject(20_010, seg(".").seq(P).ack(1).win(65535));
    t.expect_nothing(30_009);
    t.expect(30_010, keepalive_probe());
    t.expect(32_010, keepalive_probe());
    t.expect(34_010, keepalive_probe());
    t.expect_nothing(36_009);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, None);
    t.expect_nothing(36_010);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().error, Some(Error::TimedOut));
}

/// RFC 9293 §3.8.4: keep-alive is off by default: an idle connection sends nothing for
/// hours and holds no timer.
#[test]
fn no_keepalive_by_default() {
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460));
    for when in [7_200_000, 7_275_000, 10_800_000, 36_000_000] {
        t.expect_nothing(when);
    }
    assert_eq!(t.stack.poll_at(), None, "no timer armed");
    assert_eq!(t.stack.tcp_readiness(c).unwrap().state, State::Established);
}

// ---------------------------------------------------------------------------------------
// 14. Deferred receive checksum (Afterburner, Dalton et al. 1993)
// ---------------------------------------------------------------------------------------

/// A 65535-byte receive buffer keeps the window fields exact (no 16-bit cap).
fn deferral_conn() -> (Script, TcpHandle) {
    let cfg = TcpConfig { recv_buffer: 65535, ..tcp_config() };
    established(cfg, seg("S").win(65535).mss(1460).ts(1000, 0))
}

/// Reads into a buffer of `room` bytes that must return `wants`, in order; the bytes read
/// are appended to `got`.
#[track_caller]
fn reads_of(t: &mut Script, c: TcpHandle, room: usize, wants: &[usize], got: &mut Vec<u8>) {
    let mut buf = vec![0u8; room];
    for &want in wants {
        assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(want), "a read of {room} after {} bytes", got.len());
        got.extend_from_slice(&buf[..want]);
    }
}

/// At 10 ms, `data` from the first byte the peer sends, in order, in segments of `size`
/// bytes (the last may be shorter), with TSvals from 2000 up: each one deferred.
fn inject_in_order(t: &mut Script, data: &[u8], size: usize) {
    at(t, 10);
    for (i, part) in data.chunks(size).enumerate() {
        let seq = P + (size * i) as u32;
        t.inject_payload(10, seg(".").seq(seq).ack(1).win(65535).ts(2000 + i as u32, 1), part);
    }
}

/// The frame of `s` carrying `payload`, with payload byte `at` flipped (the TCP checksum
/// left as computed for the good payload).
fn corrupted(t: &Script, s: &Seg, payload: &[u8], at: usize) -> Vec<u8> {
    let mut f = t.frame(s, payload);
    let off = payload_offset(&f);
    f[off + at] ^= 0x5a;
    f
}

/// RFC 9293 §3.1 (MUST-3) and RFC 1122 §4.2.2.7: the receiver checks every checksum and
/// drops a segment that fails; the single copy (Dalton et al. 1993) moves the check of an in-order data
/// segment (>= 256 bytes, pure ACK, acknowledging nothing new, same window) into the copy
/// to the application. A corrupted one is never delivered (`tcp_recv` finds it bad and
/// returns nothing), is counted in `drops_bad_checksum`, is never acknowledged, and its
/// TSval is not recorded (RFC 7323 §4.3: only an acceptable segment updates TS.Recent); the
/// good retransmission is then delivered and acknowledged.
#[test]
fn deferred_checksum_failure_found_by_recv() {
    let (mut t, c) = deferral_conn();
    let data = stream(1000, 22);
    let s = seg(".").seq(P).ack(1).win(65535).ts(2000, 1);
    let bad = corrupted(&t, &s, &data, 500);
    at(&mut t, 10);
    t.inject_raw(&bad);
    assert_eq!(t.stack.counters().drops_bad_checksum, 0, "deferred: not checked yet");
    let mut buf = [0u8; 2000];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Err(Error::WouldBlock));
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
    assert_eq!(t.stack.tcp_info(c).unwrap().stats.bad_checksums, 1);
    for (when, s) in t.run_to(150) {
        assert_eq!(s.ack, P, "at {when} ms: an ACK covering the corrupted segment: {s:?}");
        assert_ne!(s.ts.unwrap().1, 2000, "at {when} ms: the corrupted segment's TSval was echoed");
    }
    t.inject_payload(200, seg(".").seq(P).ack(1).win(65535).ts(2001, 1), &data);
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(1000));
    assert_eq!(buf[..1000], data[..]);
    // The connection's first good data: acknowledged at once (a quick ACK, Linux
    // `tcp_event_data_recv`).
    t.expect(200, seg(".").seq(1).ack(P + 1000).win(65535 - 1000).ts(ANY, 2001));
    t.expect_nothing(300);
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
}

/// `tcp_peek` (`recv(2)` with `MSG_PEEK`): the bytes queued are copied and stay queued, in
/// order across segments, up to the buffer's length; the reads after return them again.
/// The deferred checksums of the segments it looks at are verified on the way, once.
#[test]
fn peek_copies_without_consuming() {
    let (mut t, c) = deferral_conn();
    let data = stream(2000, 23);
    t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data[..1000]);
    t.inject_payload(10, seg(".").seq(P + 1000).ack(1).win(65535).ts(2000, 1), &data[1000..]);
    let mut small = [0u8; 10];
    assert_eq!(t.stack.tcp_peek(c, &mut small), Ok(10));
    assert_eq!(small[..], data[..10]);
    let mut buf = vec![0u8; 4000];
    assert_eq!(t.stack.tcp_peek(c, &mut buf), Ok(2000), "across both segments, no more");
    assert_eq!(buf[..2000], data[..]);
    assert_eq!(t.stack.tcp_peek(c, &mut []), Ok(0));
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(2000), "all still there");
    assert_eq!(buf[..2000], data[..]);
    assert_eq!(t.stack.tcp_peek(c, &mut buf), Err(Error::WouldBlock));
    assert_eq!(t.stack.counters().drops_bad_checksum, 0);
    // At the end of the stream, as a read: 0.
    t.inject(20, seg("F.").seq(P + 2000).ack(1).win(65535).ts(2001, 1));
    assert_eq!(t.stack.tcp_peek(c, &mut buf), Ok(0));
}

/// A peek that meets a corrupted segment whose check was deferred drops it as a read would
/// (RFC 9293 §3.1 MUST-3: never delivered, counted), and ends before it.
#[test]
fn deferred_checksum_failure_found_by_peek() {
    let (mut t, c) = deferral_conn();
    let data = stream(2000, 24);
    t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data[..1000]);
    let bad = corrupted(&t, &seg(".").seq(P + 1000).ack(1).win(65535).ts(2000, 1), &data[1000..], 7);
    t.inject_raw(&bad);
    assert_eq!(t.stack.counters().drops_bad_checksum, 0, "deferred: not checked yet");
    let mut buf = vec![0u8; 4000];
    assert_eq!(t.stack.tcp_peek(c, &mut buf), Ok(1000), "the good segment, not the bad one");
    assert_eq!(buf[..1000], data[..1000]);
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(1000));
    assert_eq!(t.stack.tcp_peek(c, &mut buf), Err(Error::WouldBlock));
}

/// The same through `tcp_recv_with`, which hands segments out in place: a deferred
/// checksum is verified (a sum pass) before `drain` sees a byte, so the corrupted segment
/// never reaches it; the good retransmission does, in a drain that takes 300 bytes at a time.
#[test]
fn deferred_checksum_failure_found_by_recv_with() {
    let (mut t, c) = deferral_conn();
    let data = stream(1000, 25);
    let bad = corrupted(&t, &seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data, 3);
    at(&mut t, 10);
    t.inject_raw(&bad);
    let mut seen = 0;
    assert_eq!(
        t.stack.tcp_recv_with(c, |b| {
            seen += b.len();
            b.len()
        }),
        Err(Error::WouldBlock)
    );
    assert_eq!(seen, 0, "drain saw bytes of a segment whose checksum failed");
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
    t.inject_payload(200, seg(".").seq(P).ack(1).win(65535).ts(2001, 1), &data);
    let mut got = Vec::new();
    loop {
        // 300 bytes per call: a short drain stops the read, the rest stays queued.
        match t.stack.tcp_recv_with(c, |b| {
            let n = b.len().min(300);
            got.extend_from_slice(&b[..n]);
            n
        }) {
            Ok(n) => assert!(n <= 300),
            Err(Error::WouldBlock) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got, data);
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
}

/// The same through `tcp_recv_bufs`, which moves segments out with their buffers: the
/// corrupted segment never reaches the caller's list; the good retransmission does, whole,
/// and its buffer goes back to the pool when the caller drops it. The bytes moved count as
/// read: the window reopens for them (RFC 9293 §3.8.6.2.2, an update of a whole MSS).
#[test]
fn deferred_checksum_failure_found_by_recv_bufs() {
    let (mut t, c) = deferral_conn();
    let data = stream(1000, 26);
    let bad = corrupted(&t, &seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data, 700);
    at(&mut t, 10);
    t.inject_raw(&bad);
    let mut segs = Vec::new();
    assert_eq!(t.stack.tcp_recv_bufs(c, 1 << 20, &mut segs), Err(Error::WouldBlock));
    assert!(segs.is_empty(), "a segment whose checksum failed was handed out");
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
    let free = t.stack.pool().available();
    t.inject_payload(200, seg(".").seq(P).ack(1).win(65535).ts(2001, 1), &data);
    // A quick ACK for the connection's first good data.
    t.expect(200, seg(".").seq(1).ack(P + 1000).win(65535 - 1000).ts(ANY, 2001));
    assert_eq!(t.stack.tcp_recv_bufs(c, 1 << 20, &mut segs), Ok(1000));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].data(), &data[..]);
    assert_eq!(t.stack.tcp_recv_bufs(c, 1 << 20, &mut segs), Err(Error::WouldBlock));
    assert_eq!(t.stack.pool().available(), free - 1, "the caller holds the segment's buffer");
    drop(segs);
    assert_eq!(t.stack.pool().available(), free);
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
}

/// `tcp_recv_bufs` moves whole segments, at least one, and then only as many as keep the
/// total within `max`; what it leaves stays queued, in order.
#[test]
fn recv_bufs_moves_whole_segments_within_max() {
    let (mut t, c) = deferral_conn();
    let data = stream(3000, 27);
    inject_in_order(&mut t, &data, 1000);
    let mut segs = Vec::new();
    // Less than one segment: still one, whole.
    assert_eq!(t.stack.tcp_recv_bufs(c, 10, &mut segs), Ok(1000));
    // 1999 bytes: one more (two would be 2000).
    assert_eq!(t.stack.tcp_recv_bufs(c, 1999, &mut segs), Ok(1000));
    assert_eq!(t.stack.tcp_recv_bufs(c, 1 << 20, &mut segs), Ok(1000));
    let got: Vec<u8> = segs.iter().flat_map(|s| s.data().iter().copied()).collect();
    assert_eq!((segs.len(), got), (3, data));
    assert_eq!(t.stack.tcp_recv_bufs(c, 1 << 20, &mut segs), Err(Error::WouldBlock));
}

/// RFC 9293 §3.1 (MUST-3) and §3.10.7.4 (RCV.NXT advances only over data accepted): the
/// same, when the stack sends before the application reads: the pending segment is verified
/// (a sum-only pass) before an ACK is built, so the ACK does not cover it; the data is
/// never returned.
#[test]
fn deferred_checksum_failure_found_before_acking() {
    let (mut t, c) = deferral_conn();
    let data = stream(1000, 23);
    let s = seg(".").seq(P).ack(1).win(65535).ts(2000, 1);
    let bad = corrupted(&t, &s, &data, 999);
    at(&mut t, 10);
    t.inject_raw(&bad);
    for (when, s) in t.run_to(150) {
        assert_eq!(s.ack, P, "at {when} ms: an ACK covering the corrupted segment: {s:?}");
    }
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
    assert_eq!(recv_all(&mut t, c), b"");
    // A good segment that arrived behind the bad one is dropped with it (it was counted on
    // the unverified run); the peer's retransmission of both is delivered.
    let bad = corrupted(&t, &seg(".").seq(P).ack(1).win(65535).ts(2001, 1), &data, 0);
    at(&mut t, 200);
    t.inject_raw(&bad);
    let next = stream(1000, 24);
    t.inject_payload(200, seg(".").seq(P + 1000).ack(1).win(65535).ts(2002, 1), &next);
    t.expect(200, seg(".").seq(1).ack(P).win(65535).ts(ANY, ANY));
    assert_eq!(t.stack.counters().drops_bad_checksum, 2);
    t.inject_payload(300, seg(".").seq(P).ack(1).win(65535).ts(2003, 1), &data);
    t.inject_payload(300, seg(".").seq(P + 1000).ack(1).win(65535).ts(2003, 1), &next);
    t.expect(300, seg(".").seq(1).ack(P + 2000).win(65535 - 2000).ts(ANY, 2003));
    let mut all = data.clone();
    all.extend(&next);
    assert_eq!(recv_all(&mut t, c), all);
}

/// A device-verified segment in order behind a deferred one (a TAP mixing frames with and
/// without partial checksums): the unverified run must stay a suffix of the receive queue,
/// so the verified segment takes the full path, which checks the deferred one first. Header
/// prediction once queued it behind the deferred one, and the next check of the run
/// panicked ("suffix of rcvq is unverified"), as Linux over a TAP with offload showed.
#[test]
fn device_verified_segment_behind_a_deferred_one() {
    let (mut t, c) = deferral_conn();
    let data = stream(2000, 28);
    t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data[..1000]);
    assert_eq!(t.stack.counters().fast_path_data, 1, "the first is predicted and deferred");
    let frame = t.frame(&seg(".").seq(P + 1000).ack(1).win(65535).ts(2001, 1), &data[1000..]);
    let mut buf = t.stack.pool().alloc().expect("pool");
    buf.append(frame.len()).unwrap().copy_from_slice(&frame);
    buf.meta.flags.insert(ackclock::buf::Flags::CSUM_VERIFIED);
    let now = t.now;
    t.stack.process(now, buf);
    t.expect(10, seg(".").seq(1).ack(P + 2000).win(65535 - 2000).ts(ANY, 2000));
    assert_eq!(recv_all(&mut t, c), data);
    assert_eq!(t.stack.counters().drops_bad_checksum, 0);
}

/// RFC 9293 §3.1 (MUST-3): segments that may not be deferred are checked on arrival and a
/// bad one is dropped at once, without any ACK: out of order (a good one would draw an
/// immediate duplicate ACK, RFC 5681 §4.2), or changing the window (a bad one must not
/// change SND.WND, RFC 9293 §3.10.7.4).
#[test]
fn corrupted_segment_that_is_not_deferrable_is_dropped_at_once() {
    let (mut t, c) = deferral_conn();
    let data = stream(2000, 25);
    let cases = [
        ("out of order", seg(".").seq(P + 1000).ack(1).win(65535).ts(2000, 1), &data[1000..]),
        ("window change", seg(".").seq(P).ack(1).win(60000).ts(2000, 1), &data[..1000]),
    ];
    for (i, (what, s, payload)) in cases.into_iter().enumerate() {
        let ms = 10 + 100 * i as u64;
        let bad = corrupted(&t, &s, payload, payload.len() / 2);
        at(&mut t, ms);
        t.inject_raw(&bad);
        assert_eq!(t.stack.counters().drops_bad_checksum, i as u64 + 1, "{what}: dropped at once");
        t.expect_nothing(ms + 99);
    }
    assert_eq!(recv_all(&mut t, c), b"");
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, 65535, "the corrupted window was not applied");
    // The good segments are accepted as usual.
    t.inject_payload(400, seg(".").seq(P + 1000).ack(1).win(65535).ts(2001, 1), &data[1000..]);
    t.expect(400, seg(".").seq(1).ack(P).win(65535).ts(ANY, ANY));
    t.inject_payload(410, seg(".").seq(P).ack(1).win(65535).ts(2002, 1), &data[..1000]);
    t.expect(410, seg(".").seq(1).ack(P + 2000).win(65535 - 2000).ts(ANY, 2002));
    assert_eq!(recv_all(&mut t, c), data);
}

/// RFC 9293 §3.1 (MUST-3); the size rule itself is ours, no RFC rule (Afterburner: small
/// packets take the ordinary path). `input::SMALL_SEGMENT`: in-order data under 256 bytes
/// is never deferred (it is verified on arrival and copied into the tail of the receive
/// queue, so tiny segments cannot pin a pbuf each): a corrupted one is dropped and counted
/// at once, with no delayed ACK armed.
#[test]
fn corrupted_small_segment_is_dropped_at_once() {
    let (mut t, c) = deferral_conn();
    let data = stream(100, 27);
    let bad = corrupted(&t, &seg("P.").seq(P).ack(1).win(65535).ts(2000, 1), &data, 50);
    at(&mut t, 10);
    t.inject_raw(&bad);
    assert_eq!(t.stack.counters().drops_bad_checksum, 1, "dropped on arrival");
    t.expect_nothing(200);
    assert_eq!(recv_all(&mut t, c), b"");
    t.inject_payload(300, seg("P.").seq(P).ack(1).win(65535).ts(2001, 1), &data);
    t.expect(340, seg(".").seq(1).ack(P + 100).win(65535 - 100).ts(ANY, 2001));
    assert_eq!(recv_all(&mut t, c), data);
}

/// A small segment right behind a deferred one of 512 bytes or more is deferred too (ours,
/// no RFC rule: `input::SMALL_SEGMENT`'s exception). Verified on arrival, it would make the full
/// path check the deferred segment in a pass of its own before queueing behind it, and the
/// copy would then be a second pass; deferred, both are checked in the copy. A third, small
/// one behind the small one is not: at most one small segment follows each large deferred
/// one, so tiny segments cannot pin a pbuf each.
#[test]
fn small_segment_behind_a_deferred_one_is_deferred_too() {
    let (mut t, c) = deferral_conn();
    let data = stream(1150, 29);
    t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data[..1000]);
    t.inject_payload(10, seg("P.").seq(P + 1000).ack(1).win(65535).ts(2001, 1), &data[1000..1100]);
    let counters = t.stack.counters();
    assert_eq!((counters.fast_path_data, counters.csum_verified_early), (2, 0), "both predicted and deferred");
    t.inject_payload(10, seg("P.").seq(P + 1100).ack(1).win(65535).ts(2002, 1), &data[1100..]);
    assert_eq!(t.stack.counters().csum_verified_early, 2, "the third is checked at once, the two before it first");
    assert_eq!(recv_all(&mut t, c), data);
    assert_eq!(t.stack.counters().drops_bad_checksum, 0);
}

/// The frame of `s` (which must carry timestamps, NOP NOP TS) with its options reordered to
/// TS NOP NOP: the same 16-bit words, so the checksum still holds, but a layout header
/// prediction does not take (RFC 7323 Appendix A's is the only one it predicts).
fn ts_last(t: &Script, s: &Seg, payload: &[u8]) -> Vec<u8> {
    let mut f = t.frame(s, payload);
    assert_eq!(f[54..58], [1, 1, 8, 10]);
    f[54..66].rotate_left(2);
    f
}

/// The same exception on the full path: a small segment that header prediction turns away
/// (its timestamp option laid out otherwise) but that the full path could defer is deferred
/// behind the large deferred one too, so nothing is summed ahead of the copy; a corrupted one
/// is still found by the copy (RFC 9293 §3.1, MUST-3) and the ACK stops at its start.
#[test]
fn small_segment_on_the_full_path_behind_a_deferred_one_is_deferred_too() {
    for corrupt in [false, true] {
        let (mut t, c) = deferral_conn();
        let data = stream(1100, 31);
        t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data[..1000]);
        let mut f = ts_last(&t, &seg("P.").seq(P + 1000).ack(1).win(65535).ts(2001, 1), &data[1000..]);
        if corrupt {
            let off = payload_offset(&f);
            f[off + 3] ^= 0x5a;
        }
        at(&mut t, 10);
        let slow = t.stack.counters().slow_path;
        t.inject_raw(&f);
        let counters = t.stack.counters();
        assert_eq!(counters.slow_path, slow + 1, "the second takes the full path");
        assert_eq!((counters.csum_verified_early, counters.drops_bad_checksum), (0, 0), "deferred");
        let got = recv_all(&mut t, c);
        let counters = t.stack.counters();
        assert_eq!(counters.csum_verified_early, 0, "checked by the copy alone");
        if corrupt {
            assert_eq!(got, data[..1000]);
            assert_eq!(counters.drops_bad_checksum, 1);
            for (_, s) in t.run_to(20) {
                assert!(s.ack.wrapping_sub(P) <= 1000, "an ACK covers the bad segment: {s:?}");
                assert_ne!(s.ts.map(|t| t.1), Some(2001), "its TSval echoed: {s:?}");
            }
            t.inject_payload(20, seg("P.").seq(P + 1000).ack(1).win(65535).ts(2002, 1), &data[1000..]);
            assert_eq!(recv_all(&mut t, c), data[1000..]);
        } else {
            assert_eq!(got, data);
            assert_eq!(counters.drops_bad_checksum, 0);
        }
    }
}

/// Resource bound of the exception above (ours: no RFC rule; RFC 9293 §3.10.7.4 lets a
/// receiver hold only the window): a peer filling a 64 KiB window with a reader that does not
/// read pins at most one pbuf per 256 bytes, whatever mix of small and large segments it
/// sends, as when small segments were never deferred.
#[test]
fn small_segments_behind_deferred_ones_pin_no_more_pbufs() {
    for pattern in [&[256usize][..], &[256, 1], &[511, 1], &[512, 1], &[512, 1, 1], &[1448, 1]] {
        let (mut t, _c) = deferral_conn();
        at(&mut t, 10);
        let in_use = |t: &Script| t.stack.pool().capacity() - t.stack.pool().available();
        let base = in_use(&t);
        let (mut seq, mut bytes) = (P, 0);
        'window: loop {
            for &n in pattern {
                if bytes + n > 65535 {
                    break 'window;
                }
                t.inject_payload(10, seg(".").seq(seq).ack(1).win(65535).ts(2000, 1), &vec![0x33u8; n]);
                seq += n as u32;
                bytes += n;
            }
        }
        t.collect();
        let pbufs = in_use(&t) - base;
        assert!(pbufs * 256 <= bytes + 256, "{pattern:?}: {bytes} bytes held in {pbufs} pbufs");
    }
}

/// RFC 9293 §3.1 (MUST-3): a corrupted small segment deferred behind a good one is found by
/// the copy: the good bytes are returned, the bad segment is dropped and counted, and the
/// ACK stops at its start (RFC 9293 §3.10.7.4); the retransmission is delivered.
#[test]
fn corrupted_small_segment_behind_a_deferred_one_is_found_by_recv() {
    let (mut t, c) = deferral_conn();
    let data = stream(1100, 30);
    t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data[..1000]);
    let bad = corrupted(&t, &seg("P.").seq(P + 1000).ack(1).win(65535).ts(2001, 1), &data[1000..], 7);
    at(&mut t, 10);
    t.inject_raw(&bad);
    assert_eq!(t.stack.counters().drops_bad_checksum, 0, "deferred: not checked yet");
    let mut buf = [0u8; 4096];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(1000));
    assert_eq!(buf[..1000], data[..1000]);
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
    // The connection's first good data: a quick ACK, which does not cover the bad segment
    // (the window's right edge stays: 1000 bytes read is less than a segment's worth of
    // update, RFC 9293 §3.8.6.2.2).
    t.expect(10, seg(".").seq(1).ack(P + 1000).win(65535 - 1000).ts(ANY, 2000));
    t.inject_payload(100, seg("P.").seq(P + 1000).ack(1).win(65535).ts(2002, 1), &data[1000..]);
    t.expect(100, seg(".").seq(1).ack(P + 1100).win(65535 - 1100).ts(ANY, 2002));
    assert_eq!(recv_all(&mut t, c), &data[1000..]);
}

/// The single copy (Dalton et al. 1993) at the application's buffer: a read that has copied
/// bytes ends before a deferred segment less than half of which it can hold (a short read),
/// so that the next read copies and checks that segment in one pass; a segment alone larger
/// than the buffer is copied in part, the part summed during the copy and the rest in a sum
/// pass, and the part returned only if the whole checks. No sum pass runs ahead of the
/// copies (`csum_verified_early` stays 0).
#[test]
fn a_read_ends_before_a_deferred_segment_it_cannot_hold_half_of() {
    let (mut t, c) = deferral_conn();
    let data = stream(3000, 31);
    inject_in_order(&mut t, &data, 1000);
    let mut got = vec![];
    // A short read at the second segment's end; then a segment alone larger than the buffer.
    reads_of(&mut t, c, 2499, &[2000], &mut got);
    reads_of(&mut t, c, 300, &[300, 300, 300, 100], &mut got);
    assert_eq!(got, data);
    let counters = t.stack.counters();
    assert_eq!((counters.csum_verified_early, counters.drops_bad_checksum), (0, 0));
    // Corrupted past the part a 300-byte buffer holds: the part is not returned.
    let bad = corrupted(&t, &seg(".").seq(P + 3000).ack(1).win(65535).ts(2003, 1), &data[..1000], 900);
    at(&mut t, 20);
    t.inject_raw(&bad);
    assert_eq!(t.stack.tcp_recv(c, &mut [0u8; 300]), Err(Error::WouldBlock));
    assert_eq!(t.stack.counters().drops_bad_checksum, 1);
}

/// The other side of the rule above: a read that can hold at least half of the next
/// deferred segment fills its buffer, the part copied and summed in one pass and the rest
/// summed, so a reader with a few segments' room (an 8 KiB or 4 KiB copy loop) is not
/// handed one short read in two. The rest is delivered by later reads without a second
/// check; a corruption in the part summed but not copied is still caught, and the read
/// returns the good bytes before that segment (RFC 9293 §3.1, MUST-3).
#[test]
fn a_read_fills_its_buffer_from_a_deferred_segment_half_of_which_fits() {
    let (mut t, c) = deferral_conn();
    let data = stream(14480, 32);
    inject_in_order(&mut t, &data, 1448);
    let mut got = vec![];
    // 4096 = 2 x 1448 + 1200: 1200 of the third segment's 1448 fit, more than half; then
    // 248 + 2 x 1448 + 952 (half or more again); then 496 + 2 x 1448 = 3392, before a
    // segment only 704 bytes of which would fit (less than half: a short read).
    reads_of(&mut t, c, 4096, &[4096, 4096, 3392, 2896], &mut got);
    assert_eq!(got, data);
    let counters = t.stack.counters();
    assert_eq!((counters.csum_verified_early, counters.drops_bad_checksum), (0, 0));
}

/// The boundary of the rule: room for exactly half of the next deferred segment fills the
/// buffer (the part copied and summed, the rest summed), and the rest comes whole with the
/// next read.
#[test]
fn a_read_with_room_for_exactly_half_a_deferred_segment_fills() {
    let (mut t, c) = deferral_conn();
    let data = stream(3000, 34);
    inject_in_order(&mut t, &data, 1000);
    let mut buf = [0u8; 2500];
    assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(2500));
    assert_eq!(buf[..], data[..2500]);
    let mut rest = [0u8; 4096];
    assert_eq!(t.stack.tcp_recv(c, &mut rest), Ok(500));
    assert_eq!(rest[..500], data[2500..]);
    let counters = t.stack.counters();
    assert_eq!((counters.csum_verified_early, counters.drops_bad_checksum), (0, 0));
}

/// RFC 1071 §2(B) at the split: the part a read copies and the rest it sums meet at any
/// byte offset, odd ones included, where the rest's sum is byte-swapped before it is added
/// (`checksum::add_at`). Good segments split anywhere verify and arrive whole.
#[test]
fn deferred_segments_split_by_a_read_at_odd_offsets_verify() {
    for room in [501usize, 502, 503, 999, 1000] {
        let (mut t, c) = deferral_conn();
        let data = stream(3003, 41);
        inject_in_order(&mut t, &data, 1001);
        let mut buf = vec![0u8; 1001 + room];
        assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(1001 + room), "room {room}");
        let mut got = buf.clone();
        got.extend(recv_all(&mut t, c));
        assert_eq!(got, data, "room {room}");
        assert_eq!(t.stack.counters().drops_bad_checksum, 0, "room {room}");
    }
}

/// RFC 9293 §3.1 (MUST-3) and §3.10.7.4, RFC 7323 §4.3: a segment a read fills its buffer
/// from, corrupted in the part the read copies or in the rest it only sums, behind segments
/// already copied, is found. The read returns exactly the bytes before it, it is dropped
/// and counted, no ACK covers it and none echoes its TSval, and its retransmission is then
/// delivered and acknowledged.
#[test]
fn a_corrupted_segment_a_read_fills_from_is_found_in_either_part() {
    // A 4 KiB read takes 2 x 1448 and then 1200 of the third segment's 1448 bytes.
    for byte in [0usize, 1, 601, 1199, 1200, 1201, 1447] {
        let (mut t, c) = deferral_conn();
        let data = stream(3 * 1448, 35);
        at(&mut t, 10);
        for i in 0..2u32 {
            let part = &data[1448 * i as usize..1448 * (i as usize + 1)];
            t.inject_payload(10, seg(".").seq(P + 1448 * i).ack(1).win(65535).ts(2000 + i, 1), part);
        }
        let bad = corrupted(&t, &seg(".").seq(P + 2896).ack(1).win(65535).ts(2002, 1), &data[2896..], byte);
        t.inject_raw(&bad);
        let mut buf = [0u8; 4096];
        assert_eq!(t.stack.tcp_recv(c, &mut buf), Ok(2896), "byte {byte}: the good segments alone");
        assert_eq!(buf[..2896], data[..2896], "byte {byte}");
        assert_eq!(t.stack.counters().drops_bad_checksum, 1, "byte {byte}");
        assert_eq!(t.stack.tcp_recv(c, &mut buf), Err(Error::WouldBlock), "byte {byte}");
        let mut sent: Vec<_> = t.run_to(20).into_iter().map(|(_, s)| s).collect();
        t.inject_payload(20, seg(".").seq(P + 2896).ack(1).win(65535).ts(2003, 1), &data[2896..]);
        assert_eq!(recv_all(&mut t, c), data[2896..], "byte {byte}: the retransmission");
        let before_retransmission = sent.len();
        sent.extend(t.run_to(300).into_iter().map(|(_, s)| s));
        for s in &sent[..before_retransmission] {
            assert!(s.ack.wrapping_sub(P) <= 2896, "byte {byte}: an ACK covers the bad segment: {s:?}");
            assert_ne!(s.ts.map(|t| t.1), Some(2002), "byte {byte}: its TSval echoed: {s:?}");
        }
        let last = sent.last().expect("the retransmission is acknowledged");
        assert_eq!((last.ack.wrapping_sub(P), last.ts.map(|t| t.1)), (3 * 1448, Some(2003)), "byte {byte}");
    }
}

/// RFC 9293 §3.1 (MUST-3) and §3.10.7.4: a segment whose checksum fails is dropped without
/// an answer, deferred or not. At the start of a connection every data segment owes a quick
/// ACK; the ACK for a deferred one first checks it, and when it fails the ACK it asked for
/// is not sent either: three corrupted segments must not draw three duplicate ACKs, which
/// would make the peer retransmit as for a loss (RFC 5681 §3.2).
#[test]
fn a_corrupted_deferred_segment_draws_no_ack() {
    for len in [100usize, 1000] {
        let (mut t, _c) = deferral_conn();
        t.discard();
        let data = stream(len, 38);
        for (i, ms) in [10u64, 20, 30].into_iter().enumerate() {
            let bad = corrupted(&t, &seg(".").seq(P).ack(1).win(65535).ts(2000 + i as u32, 1), &data, len / 2);
            at(&mut t, ms);
            t.inject_raw(&bad);
            let sent = t.run_to(ms + 5);
            assert_eq!(t.stack.counters().drops_bad_checksum, i as u64 + 1, "{len} bytes");
            assert!(sent.is_empty(), "{len} bytes, corrupted segment {}: {sent:?}", i + 1);
        }
    }
}

/// The same without quick ACKs, where the ACK a deferred segment owes comes from the
/// delayed-ACK timer (RFC 5681 §4.2): corrupted, it owes nothing and nothing is sent, not
/// even when the timer comes due. A good segment ahead of a corrupted one is acknowledged
/// alone, once. A segment behind a
/// corrupted one is dropped with it, unchecked: in effect it arrived out of order, which
/// owes one immediate duplicate ACK (RFC 5681 §4.2), not a delayed one.
#[test]
fn corrupted_deferred_segments_draw_no_delayed_ack() {
    let cfg = TcpConfig { recv_buffer: 65535, quick_acks: false, ..tcp_config() };
    let data = stream(2000, 39);
    for (good, bad) in [(0usize, 1usize), (0, 2), (1, 1)] {
        let (mut t, _c) = established(cfg.clone(), seg("S").win(65535).mss(1460).ts(1000, 0));
        t.discard();
        at(&mut t, 10);
        for i in 0..good + bad {
            let s = seg(".").seq(P + 1000 * i as u32).ack(1).win(65535).ts(2000 + i as u32, 1);
            let part = &data[1000 * i..1000 * (i + 1)];
            match i < good {
                true => t.inject_payload(10, s, part),
                false => t.inject_raw(&corrupted(&t, &s, part, 500)),
            }
        }
        let (times, sent): (Vec<u64>, Vec<_>) = t.run_to(300).into_iter().unzip();
        assert_eq!(t.stack.counters().drops_bad_checksum, 1, "{good} good, {bad} bad");
        let acks: Vec<(u64, u32)> = times.iter().zip(&sent).map(|(&ms, s)| (ms, s.ack.wrapping_sub(P))).collect();
        // The duplicate ACK at once. The good segment's ACK also goes at once: with the bad
        // one behind it, two segments owed an ACK (RFC 5681 §4.2's every second segment)
        // before the check took one back; an ACK sooner than the rule asks is allowed.
        let want: Vec<(u64, u32)> = match (good, bad) {
            (0, 1) => vec![],
            (0, _) => vec![(11, 0)],
            _ => vec![(11, 1000 * good as u32)],
        };
        assert_eq!(acks, want, "{good} good, {bad} bad: {sent:?}");
        assert!(sent.iter().all(|s| s.ts.is_some_and(|t| t.1 < 2000 + good as u32)), "a bad TSval echoed");
    }
}

/// A read with no room reads nothing. With bytes queued it returns `Ok(0)`, as Linux's
/// `recv(2)` of no bytes (`tcp_recvmsg` finds the queue readable and copies nothing) and the
/// runtime's streams do: it neither looks at a deferred segment (no sum pass) nor consumes
/// anything, and the next read gets every byte. With nothing queued it returns what any
/// read would: `WouldBlock`, then the end of the stream after the FIN.
#[test]
fn a_read_with_an_empty_buffer_reads_nothing() {
    let (mut t, c) = deferral_conn();
    assert_eq!(t.stack.tcp_recv(c, &mut []), Err(Error::WouldBlock));
    let data = stream(1000, 37);
    t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(2000, 1), &data);
    let counts = |t: &Script| (t.stack.counters().csum_verified_early, t.stack.counters().segs_out);
    let before = counts(&t);
    assert_eq!(t.stack.tcp_recv(c, &mut []), Ok(0));
    assert_eq!(counts(&t), before, "no sum pass, nothing sent");
    assert_eq!(recv_all(&mut t, c), data);
    assert_eq!(t.stack.counters().csum_verified_early, 0, "the copy checked it");
    t.inject(20, seg("F.").seq(P + 1000).ack(1).win(65535).ts(2001, 1));
    assert_eq!(t.stack.tcp_recv(c, &mut []), Ok(0), "the end of the stream");
}

/// RFC 7323 §5.3 R3 with §4.3: after 24 days without a segment, a PAWS-old TSval is taken as
/// TS.Recent, which only a good segment may set. A data segment with such a TSval is
/// therefore checked on arrival, not deferred: a corrupted one is dropped at once and leaves
/// TS.Recent alone, and the good retransmission, older still, is taken by R3 and echoed.
#[test]
fn a_paws_old_segment_after_24_idle_days_is_checked_on_arrival() {
    let (mut t, c) = deferral_conn();
    let data = stream(1000, 36);
    t.inject_payload(10, seg(".").seq(P).ack(1).win(65535).ts(5000, 1), &data[..500]);
    assert_eq!(recv_all(&mut t, c), data[..500]);
    t.discard();
    let later = 10 + 25 * 24 * 3600 * 1000;
    at(&mut t, later);
    t.discard();
    let bad = corrupted(&t, &seg(".").seq(P + 500).ack(1).win(65535).ts(4000, 1), &data[500..], 10);
    t.inject_raw(&bad);
    assert_eq!(t.stack.counters().drops_bad_checksum, 1, "checked on arrival, not deferred");
    // Older than the bad one's TSval: PAWS would drop it had that TSval become TS.Recent.
    t.inject_payload(later, seg(".").seq(P + 500).ack(1).win(65535).ts(3000, 1), &data[500..]);
    assert_eq!(recv_all(&mut t, c), data[500..]);
    let sent = t.sent_now();
    let last = sent.last().expect("an ACK for the retransmission");
    assert_eq!((last.ack.wrapping_sub(P), last.ts.map(|t| t.1)), (1000, Some(3000)));
}

// ---------------------------------------------------------------------------------------
// 15. Malformed input
// ---------------------------------------------------------------------------------------

/// RFC 9293 §3.1 (MUST-7: illegal option lengths must not crash the receiver) and §3.10.7.4:
/// bad checksums, truncated or inconsistent headers and bad option lengths are counted and
/// dropped without an answer; an option-less SYN on an established connection draws a
/// challenge ACK (RFC 5961 §4). The connection carries on.
#[test]
fn malformed_segments_are_counted_and_dropped() {
    use ackclock::tcp::Counters;
    type Counter = fn(&Counters) -> u64;
    let (mut t, c) = established(tcp_config(), seg("S").win(65535).mss(1460).sack_ok().ts(1000, 0));
    let data = stream(100, 26);
    let good = t.frame(&seg("P.").seq(P).ack(1).win(65535).ts(2000, 1), &data);
    let ack = t.frame(&seg(".").seq(P).ack(1).win(65535), &[]);
    let malformed = |c: &Counters| c.drops_malformed;
    let bad_sum = |c: &Counters| c.drops_bad_checksum;
    let mut cases: Vec<(&str, Vec<u8>, Counter)> = vec![];

    let mut f = ack.clone();
    f[34 + 16] ^= 0xff;
    cases.push(("pure ACK with a bad checksum", f, bad_sum));
    let mut f = t.frame(&seg("P.").seq(P + 1000).ack(1).win(65535).ts(2000, 1), &data);
    f[34 + 16] ^= 0x01;
    cases.push(("out-of-order data segment with a bad checksum", f, bad_sum));
    let mut f = good[..34 + 12].to_vec();
    fix_ipv4(&mut f);
    cases.push(("TCP header cut at 12 bytes", f, malformed));
    let mut f = ack.clone();
    f[34 + 12] = (f[34 + 12] & 0x0f) | (4 << 4);
    fix_tcp(&mut f);
    cases.push(("data offset 4 (16 bytes)", f, malformed));
    let mut f = ack.clone();
    f[34 + 12] = (f[34 + 12] & 0x0f) | (15 << 4);
    fix_tcp(&mut f);
    cases.push(("data offset 15 beyond the segment", f, malformed));
    // The data segment's options are NOP NOP TS (12 bytes at 54..66): replace them.
    let opts: [(&str, [u8; 12]); 7] = [
        ("option length 0", [8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ("option length 1", [1, 1, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
        ("option longer than the header", [1, 1, 2, 40, 5, 180, 0, 0, 0, 0, 0, 0]),
        ("MSS of length 3", [2, 3, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
        ("timestamps of length 9", [8, 9, 0, 0, 7, 208, 0, 0, 0, 1, 0, 1]),
        ("SACK of length 11", [5, 11, 0, 15, 66, 65, 0, 15, 66, 65, 1, 0]),
        ("unknown kind of length 0", [254, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
    ];
    for (what, o) in opts {
        let mut f = good.clone();
        f[54..66].copy_from_slice(&o);
        fix_tcp(&mut f);
        cases.push((what, f, malformed));
    }
    cases.push(("frame shorter than an Ethernet header", good[..10].to_vec(), malformed));
    cases.push(("IPv4 header cut short", good[..14 + 12].to_vec(), malformed));
    let mut f = good.clone();
    Ipv4Packet::new_unchecked(&mut f[14..34]).set_total_len(2000);
    Ipv4Packet::new_unchecked(&mut f[14..34]).fill_checksum();
    cases.push(("IPv4 total length beyond the frame", f, malformed));
    let mut f = good.clone();
    f[14] = 0x44;
    Ipv4Packet::new_unchecked(&mut f[14..34]).fill_checksum();
    cases.push(("IHL 4", f, malformed));
    let mut f = good.clone();
    f[14 + 10] ^= 0x01;
    cases.push(("IPv4 header checksum wrong", f, bad_sum));
    let mut f = good.clone();
    f[14 + 6] |= 0x20;
    Ipv4Packet::new_unchecked(&mut f[14..34]).fill_checksum();
    cases.push(("IPv4 fragment (more fragments)", f, |c: &Counters| c.drops_fragment));
    let mut f = good.clone();
    f[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 99]);
    Ipv4Packet::new_unchecked(&mut f[14..34]).fill_checksum();
    cases.push(("another IPv4 destination", f, |c: &Counters| c.drops_not_for_us));

    for (i, (what, frame, counter)) in cases.iter().enumerate() {
        let ms = 10 + i as u64;
        at(&mut t, ms);
        let before = counter(t.stack.counters());
        t.inject_raw(frame);
        assert_eq!(counter(t.stack.counters()), before + 1, "{what}: counted");
        t.expect_nothing(ms);
    }
    assert_eq!(recv_all(&mut t, c), b"");

    // RFC 5961 §4: a SYN (no options) on an established connection: challenge ACK.
    let before = *t.stack.counters();
    t.inject(100, seg("S").seq(P + 10).win(65535));
    t.expect(100, seg(".").seq(1).ack(P).win(65535).ts(ANY, ANY));
    assert_eq!(t.stack.counters().challenge_acks, before.challenge_acks + 1);
    assert_eq!(t.stack.counters().drops(), before.drops() + 1);
    assert_eq!(t.stack.tcp_readiness(c).unwrap().state, State::Established);

    // The connection is intact: the good segment is delivered (with Ethernet padding
    // behind it, which the IPv4 total length cuts off).
    at(&mut t, 110);
    let mut padded = good.clone();
    padded.extend_from_slice(&[0xee; 6]);
    t.inject_raw(&padded);
    t.expect(150, seg(".").seq(1).ack(P + 100).win(65535).ts(ANY, 2000));
    assert_eq!(recv_all(&mut t, c), data);
}

/// Socket options change on a live connection: turning Nagle off (RFC 9293 §3.7.4's
/// "nodelay") lets a second short segment out while the first is unacknowledged; the
/// congestion-control algorithm cannot change after the handshake.
#[test]
fn options_change_on_a_live_connection() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    t.stack.tcp_send(c, b"one").unwrap();
    t.expect(1, seg("P.").seq(1).ack(PEER_ISS + 1).win(65535).len(3));
    t.stack.tcp_send(c, b"two").unwrap();
    t.expect_nothing(2);
    let mut opts = t.stack.tcp_options(c).unwrap();
    opts.nodelay = true;
    t.stack.tcp_set_options(c, opts).unwrap();
    t.expect(3, seg("P.").seq(4).ack(PEER_ISS + 1).win(65535).len(3));
    opts.congestion = ackclock::tcp::cc::Algorithm::Cubic { hystart: false };
    assert_eq!(t.stack.tcp_set_options(c, opts), Err(ackclock::Error::InvalidArgument));
}

/// RFC 7323 §5.3 with Linux's `tcp_disordered_ack` exemption: a pure duplicate ACK that
/// arrives after a newer one (older TSval by less than an RTO) is not a PAWS drop; a data
/// segment with the same old timestamp still is.
#[test]
fn reordered_duplicate_ack_is_not_a_paws_drop() {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460).ts(1000, 0));
    t.stack.tcp_send(c, &[1u8; 3000]).unwrap();
    t.expect(1, seg(".").seq(1).ack(PEER_ISS + 1).win(65535).len(1448).ts(ANY, 1001));
    t.expect(1, seg(".").seq(1449).ack(PEER_ISS + 1).win(65535).len(1448).ts(ANY, 1001));
    t.discard();
    // Newer ACK first (TSval 1010), then an older duplicate of the original ACK (1005).
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(1).win(65535).ts(1010, ANY));
    t.inject(2, seg(".").seq(PEER_ISS + 1).ack(1).win(65535).ts(1005, ANY));
    assert_eq!(t.stack.counters().drops_paws, 0);
    // Data with an old timestamp is still dropped.
    t.inject(3, seg("P.").seq(PEER_ISS + 1).ack(1).win(65535).ts(1004, ANY).len(10));
    assert_eq!(t.stack.counters().drops_paws, 1);
    // An overtaken ACK usually offers the smaller window of its time: it would not open the
    // window, so it is let through too (Linux: `!tcp_may_update_window`), and its SACK
    // blocks and D-SACKs count. One with an old timestamp that would open the window is
    // still dropped.
    t.inject(4, seg(".").seq(PEER_ISS + 1).ack(1).win(65000).ts(1006, ANY));
    assert_eq!(t.stack.counters().drops_paws, 1);
    let smaller = t.stack.tcp_info(c).unwrap().snd_wnd;
    assert_eq!(smaller, 65000, "RFC 9293 §3.10.7.4: same SEG.SEQ and SEG.ACK update the window");
    t.inject(4, seg(".").seq(PEER_ISS + 1).ack(1).win(65535).ts(1007, ANY));
    assert_eq!(t.stack.counters().drops_paws, 2);
    assert_eq!(t.stack.tcp_info(c).unwrap().snd_wnd, smaller);
}

/// Linux behaviour (an skb's truesize is charged to the send buffer), no RFC rule; RFC 9293
/// §3.7.4 allows Nagle off. Tiny writes with Nagle off each go out as a segment of their
/// own (unsent writes would coalesce); the send buffer charges each unacknowledged one at
/// least 256 bytes, so an application cannot pin a pbuf per byte: with a 4 KiB send buffer,
/// at most 16 one-byte segments are outstanding before `send` would block.
#[test]
fn tiny_writes_are_charged_a_minimum_per_segment() {
    let mut cfg = tcp_config();
    cfg.send_buffer = 4096;
    cfg.nodelay = true;
    cfg.initial_window = 100;
    let mut t = Script::new(cfg);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460));
    let mut queued = 0;
    for _ in 0..100 {
        match t.stack.tcp_send(c, b"x") {
            Ok(1) => {
                queued += 1;
                t.collect(); // sent at once, never acknowledged
            }
            Err(ackclock::Error::WouldBlock) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(queued, 4096 / 256);
    assert!(!t.stack.tcp_readiness(c).unwrap().writable);
}

/// RFC 9293 §3.10.7.4 (a segment is trimmed to the receive window; the part beyond the
/// right edge is not accepted) on the fast path, as Linux's `tcp_rcv_established` does: in-
/// order data is predicted only if it ends at or before the right edge we advertised, even
/// when the buffer has room for more. Here 65000 bytes arrive unread into a 65535-byte
/// buffer (right edge P + 65535), the application reads 1000 (too little for a window
/// update), and the peer sends 1460 bytes where 535 fit the window: 535 are kept, and
/// `tcp_recv` returns exactly the bytes up to the edge. Before, the fast path took all 1460;
/// and the full path deferred the segment's checksum and then trimmed it, so the check
/// failed and the 535 bytes were dropped as corrupt.
#[test]
fn in_order_data_beyond_the_advertised_window_is_cut_at_the_right_edge() {
    let cfg = TcpConfig { recv_buffer: 65535, ..tcp_config() };
    let (mut t, c) = established(cfg, seg("S").win(65535).mss(1460));
    let data = stream(66460, 3);
    for k in 0..65u32 {
        t.inject_payload(10, kseg(k, 10, false), &data[1000 * k as usize..1000 * (k + 1) as usize]);
    }
    let sent = t.run_to(11);
    assert_eq!(sent.last().map(|(_, s)| (s.ack, s.win)), Some((P + 65000, 535)));
    let mut first = [0u8; 1000];
    assert_eq!(t.stack.tcp_recv(c, &mut first), Ok(1000));
    t.expect_nothing(20);
    let fast = t.stack.counters().fast_path_data;
    t.inject_payload(30, seg(".").seq(P + 65000).ack(1).win(65535).len(1460), &data[65000..66460]);
    // The 535 bytes kept count as one segment, acknowledged at once (the connection is still
    // in quick-ACK mode, Linux `__tcp_ack_snd_check`: one of its 16 quick ACKs was spent),
    // for the right edge, with the window now closed.
    t.expect(30, seg(".").seq(1).ack(P + 65535).win(0));
    assert_eq!(t.stack.counters().fast_path_data, fast, "beyond the right edge: the full path");
    // Checked at once, not deferred: a trimmed segment could not be checked later.
    assert_eq!(t.stack.counters().drops_bad_checksum, 0);
    let mut all = first.to_vec();
    all.extend(recv_all(&mut t, c));
    assert!(all == data[..65535], "{} bytes delivered", all.len());
}
