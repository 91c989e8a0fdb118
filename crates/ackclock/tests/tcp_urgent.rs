//! Urgent data at the receiver (RFC 9293 §3.8.5 and §3.10.7.4 sixth step; RFC 1122 §4.2.2.4;
//! RFC 6093): RCV.UP follows the peer's urgent pointer, the application is told when urgent
//! data appears or the pointer advances (MUST-32) and can learn how much of it is left to
//! read (MUST-33), urgent data of any length is followed (MUST-30), and the data stays in
//! line. Packet-level, on virtual time; the test plays the peer (see `common/script.rs`).

mod common;

use ackclock::socket::Event;
use ackclock::{Error, Stack, TcpHandle};
use common::script::*;
use common::stream;
use std::net::SocketAddrV4;

/// The peer's first data byte.
const P: u32 = PEER_ISS + 1;

fn established() -> (Script, TcpHandle) {
    let mut t = Script::new(tcp_config());
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460).ts(1000, 0));
    while t.stack.poll_event().is_some() {}
    (t, c)
}

/// The peer's segment `[P + a, P + b)` of `data` with flags `f` (and `up` as the urgent
/// pointer field).
fn data_seg(t: &mut Script, ms: u64, f: &str, up: u16, a: u32, b: u32, data: &[u8]) {
    let s = seg(f).seq(P + a).ack(1).win(65535).ts(2000 + ms as u32, 1).len((b - a) as usize).urg(up);
    t.inject_payload(ms, s, &data[a as usize..b as usize]);
}

fn read(t: &mut Script, c: TcpHandle, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match t.stack.tcp_recv(c, &mut buf[got..]) {
            Ok(0) | Err(Error::WouldBlock) => break,
            Ok(k) => got += k,
            Err(e) => panic!("tcp_recv: {e}"),
        }
    }
    buf.truncate(got);
    buf
}

fn urgent(t: &Script, c: TcpHandle) -> Option<usize> {
    t.stack.tcp_readiness(c).unwrap().urgent
}

/// (the stack's count, the connection's count) of urgent signals.
fn signals(t: &Script, c: TcpHandle) -> (u64, u64) {
    (t.stack.counters().urgent_signals, t.stack.tcp_info(c).unwrap().stats.urgent_signals)
}

fn events(stack: &mut Stack) -> Vec<Event> {
    std::iter::from_fn(|| stack.poll_event()).collect()
}

/// RFC 9293 §3.10.7.4 sixth step: "If the URG bit is set, RCV.UP <- max(RCV.UP,SEG.UP),
/// and signal the user that the remote side has urgent data if the urgent pointer (RCV.UP)
/// is in advance of the data consumed." MUST-33: the application learns how much urgent
/// data remains to be read; RFC 6093 §4: the data is delivered in line. Before, the urgent
/// pointer was never read: the segment's data arrived and nobody was told.
#[test]
fn rfc9293_3_10_7_4_urgent_pointer_is_signalled_and_its_data_counted_down_in_line() {
    let (mut t, c) = established();
    let data = stream(1000, 7);
    // 100 bytes, the last of them urgent: the pointer is the octet after it (MUST-31).
    data_seg(&mut t, 10, "U.P", 100, 0, 100, &data);
    assert_eq!(events(&mut t.stack), vec![Event::Tcp(c)], "the application is told");
    assert_eq!(signals(&t, c), (1, 1));
    assert_eq!(urgent(&t, c), Some(100));
    // Its ACK is an ordinary one: no urgent pointer of ours.
    t.expect(10, seg(".").seq(1).ack(P + 100).win(65535).ts(ANY, 2010));
    assert_eq!(read(&mut t, c, 40), data[..40]);
    assert_eq!(urgent(&t, c), Some(60));
    assert_eq!(read(&mut t, c, 59), data[40..99]);
    assert_eq!(urgent(&t, c), Some(1), "the last urgent byte is next");
    assert_eq!(read(&mut t, c, 1), data[99..100], "in line, in the stream (RFC 6093 §4)");
    assert_eq!(urgent(&t, c), None, "read past the mark: no urgent data pending");
    // Ordinary data after it: no urgent data, no signal.
    data_seg(&mut t, 20, ".P", 0, 100, 200, &data);
    assert_eq!(urgent(&t, c), None);
    assert_eq!(signals(&t, c), (1, 1));
}

/// RFC 1122 §4.2.2.4 (MUST-30): "A TCP MUST support a sequence of urgent data of any
/// length." The pointer may lie beyond the segment that carries it, and beyond the window
/// (RFC 9293 §3.8.5: the urgent pointer may point past data received so far); the
/// following segments without URG keep the mark.
#[test]
fn rfc1122_4_2_2_4_urgent_data_longer_than_the_segment_carrying_its_pointer() {
    let (mut t, c) = established();
    let data = stream(3000, 8);
    data_seg(&mut t, 10, "U.", 2500, 0, 1000, &data);
    assert_eq!(urgent(&t, c), Some(2500), "the mark lies 1,500 bytes past what arrived");
    data_seg(&mut t, 11, ".", 0, 1000, 2000, &data);
    assert_eq!(read(&mut t, c, 2000), data[..2000]);
    assert_eq!(urgent(&t, c), Some(500));
    data_seg(&mut t, 12, ".P", 0, 2000, 3000, &data);
    assert_eq!(read(&mut t, c, 500), data[2000..2500]);
    assert_eq!(urgent(&t, c), None);
    assert_eq!(read(&mut t, c, 500), data[2500..3000]);
    assert_eq!(signals(&t, c), (1, 1), "one continuous sequence of urgent data: one signal");
}

/// RFC 1122 §4.2.2.4 (RFC 9293 MUST-32): inform the application "whenever it receives an
/// Urgent pointer and there was previously no pending urgent data, or whenever the Urgent
/// pointer advances in the data stream"; RFC 9293: "If the user has already been signaled
/// (or is still in the 'urgent mode') for this continuous sequence of urgent data, do not
/// signal the user again."
#[test]
fn rfc1122_4_2_2_4_signal_once_per_pointer_again_when_it_advances() {
    let (mut t, c) = established();
    let data = stream(3000, 9);
    data_seg(&mut t, 10, "U.", 1500, 0, 1000, &data);
    assert_eq!(signals(&t, c), (1, 1));
    // The next segment repeats the same pointer (as senders do while in urgent mode:
    // SEG.UP relative to its own SEG.SEQ). Not an advance: no second signal.
    data_seg(&mut t, 11, "U.", 500, 1000, 2000, &data);
    assert_eq!(signals(&t, c), (1, 1));
    assert_eq!(urgent(&t, c), Some(1500));
    // The pointer moves further: a new signal.
    data_seg(&mut t, 12, "U.", 900, 2000, 3000, &data);
    assert_eq!(signals(&t, c), (2, 2));
    assert_eq!(urgent(&t, c), Some(2900));
    assert_eq!(read(&mut t, c, 3000), data[..3000]);
    assert_eq!(urgent(&t, c), None);
}

/// An urgent pointer below RCV.NXT, on a segment the peer sent again (here overlapping new
/// data, so acceptable), is not new urgent data (Linux `tcp_check_urg`: "Do not replay urg
/// ptr"): the application, which may have read past it long ago, is not told again.
#[test]
fn rfc9293_3_10_7_4_an_old_urgent_pointer_is_not_replayed() {
    let (mut t, c) = established();
    let data = stream(2000, 10);
    data_seg(&mut t, 10, ".", 0, 0, 1000, &data);
    t.expect(10, seg(".").seq(1).ack(P + 1000).win(65535).ts(ANY, 2010));
    // [P+500, P+1500) with URG pointing at P+700, below RCV.NXT; its new half is taken.
    data_seg(&mut t, 20, "U.", 200, 500, 1500, &data);
    assert_eq!(urgent(&t, c), None);
    assert_eq!(signals(&t, c), (0, 0));
    assert_eq!(read(&mut t, c, 2000), data[..1500]);
}

/// The pointer may arrive before the urgent data does, on a segment without data (a sender
/// in urgent mode whose window is full still sends the pointer on its ACKs): the
/// application learns that urgent data is coming and how far ahead it ends.
#[test]
fn rfc9293_3_8_5_urgent_pointer_on_a_segment_without_data() {
    let (mut t, c) = established();
    t.inject(10, seg("U.").seq(P).ack(1).win(65535).ts(2010, 1).urg(300));
    t.expect_nothing(10);
    assert_eq!(events(&mut t.stack), vec![Event::Tcp(c)]);
    assert_eq!(urgent(&t, c), Some(300));
    assert_eq!(signals(&t, c), (1, 1));
}

/// RFC 9293 §3.10.7.4 sixth step, CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT: "This should not
/// occur since a FIN has been received from the remote side. Ignore the URG."
#[test]
fn rfc9293_3_10_7_4_urg_after_the_peers_fin_is_ignored() {
    let (mut t, c) = established();
    t.inject(10, seg("F.").seq(P).ack(1).win(65535).ts(2010, 1));
    t.expect(10, seg(".").seq(1).ack(P + 1).win(65535).ts(ANY, 2010));
    t.inject(20, seg("U.").seq(P + 1).ack(1).win(65535).ts(2020, 1).urg(100));
    assert_eq!(urgent(&t, c), None);
    assert_eq!(signals(&t, c), (0, 0));
    assert_eq!(read(&mut t, c, 10), b"", "end of stream");
}

// ---------------------------------------------------------------------------------------
// The sender: SEND with the URGENT flag (RFC 9293 §3.9.1.2), SND.UP and urgent mode
// ---------------------------------------------------------------------------------------

/// Our segment `[1 + a, 1 + b)` (relative to our ISS) with flags `f` and urgent pointer
/// `up`, acknowledging everything of the peer's below `P + rcv`.
fn ours(f: &str, a: u32, b: u32, up: u16, rcv: u32) -> Seg {
    seg(f).seq(1 + a).ack(P + rcv).win(65535).ts(ANY, ANY).len((b - a) as usize).urg(up)
}

/// RFC 9293 §3.8.5 (MUST-31): the urgent pointer is the offset from SEG.SEQ of the octet
/// following the urgent data; every segment below SND.UP carries URG, the pointer relative
/// to its own sequence number, so a pointer beyond the segment is normal (MUST-30: urgent
/// data of any length). Once the peer acknowledges the urgent data, urgent mode ends and
/// data goes out as before. Before, there was no way to send urgent data.
#[test]
fn rfc9293_3_8_5_urgent_data_sent_with_the_pointer_in_every_segment_below_it() {
    let (mut t, c) = established();
    let data = stream(3000, 11);
    assert_eq!(t.stack.tcp_send_urgent(c, &data), Ok(3000));
    t.expect(0, ours("U.", 0, 1448, 3000, 0));
    t.expect(0, ours("U.", 1448, 2896, 1552, 0));
    let last = t.expect(0, ours("U.P", 2896, 3000, 104, 0));
    // The peer acknowledges it all: urgent mode is over.
    t.inject(10, seg(".").seq(P).ack(3001).win(65535).ts(2010, last.ts.unwrap().0));
    assert_eq!(t.stack.tcp_send(c, &data[..100]), Ok(100));
    t.expect(10, ours(".P", 3000, 3100, 0, 0));
    assert_eq!(t.stack.tcp_info(c).unwrap().state, ackclock::tcp::State::Established);
}

/// Urgent bytes follow ordinary ones in the stream: the ordinary segment already sent
/// carries nothing; the pointer counts from each segment's own SEG.SEQ. A pure ACK sent at
/// SND.MAX, past SND.UP, carries no pointer (as Linux's: only segments before SND.UP).
#[test]
fn rfc9293_3_8_5_pointer_relative_to_each_segment_and_not_on_acks_past_it() {
    let (mut t, c) = established();
    let data = stream(400, 12);
    assert_eq!(t.stack.tcp_send(c, &data[..300]), Ok(300));
    let first = t.expect(0, ours(".P", 0, 300, 0, 0));
    assert_eq!(t.stack.tcp_send_urgent(c, &data[300..]), Ok(100));
    t.expect(0, ours("U.P", 300, 400, 100, 0));
    // The peer sends data but acknowledges only the first segment: our ACK of its data
    // goes at SND.MAX, beyond the urgent data, so without URG.
    let reply = stream(10, 13);
    let echo = first.ts.unwrap().0;
    t.inject_payload(10, seg(".P").seq(P).ack(301).win(65535).ts(2010, echo).len(10), &reply);
    t.expect(10, ours(".", 400, 400, 0, 10));
    // The urgent segment's retransmission after the RTO carries the pointer again.
    let (_, sent) = t.run_to(1500).into_iter().next().expect("a retransmission");
    assert_eq!((sent.seq, sent.len, sent.urgent), (301, 100, 100));
    assert!(sent.flags.contains(ackclock::wire::TcpFlags::URG), "{sent:?}");
}

/// The receiver of our own urgent data is a stack like ours: end to end over the script,
/// what one side marks the other reports (MUST-32, MUST-33), with the bytes in line.
#[test]
fn rfc9293_3_8_5_urgent_send_then_the_peer_side_sees_the_mark() {
    let (mut t, c) = established();
    assert_eq!(t.stack.tcp_send_urgent(c, b"\xff\xf4\xff\xf2"), Ok(4));
    let s = t.expect(0, ours("U.P", 0, 4, 4, 0));
    assert_eq!(s.payload, b"\xff\xf4\xff\xf2", "Telnet's IP and Data Mark, in line");
}

/// With segmentation offload, a unit holding urgent data is cut into segments of one MSS
/// before it leaves: the device would repeat the first segment's urgent pointer in every
/// piece, where it is wrong for all but the first.
#[test]
fn rfc9293_3_8_5_offload_units_holding_urgent_data_are_cut_before_the_device() {
    let mut cfg = stack_config();
    cfg.pool = ackclock::buf::PoolConfig { buffers: 256, buffer_size: 65536 + 256, headroom: 160 };
    let caps = ackclock::phy::Capabilities { tso_max: 65535, ..ackclock::phy::Capabilities::ethernet(1500) };
    let mut t = Script::with_config(cfg, caps);
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let c = t.accept_with(l, seg("S").win(65535).mss(1460).ts(1000, 0));
    let data = stream(3000, 14);
    assert_eq!(t.stack.tcp_send_urgent(c, &data), Ok(3000));
    for (a, b, up, f) in [(0, 1448, 3000, "U."), (1448, 2896, 1552, "U."), (2896, 3000, 104, "U.P")] {
        let s = t.expect(0, ours(f, a, b, up, 0));
        assert_eq!(s.payload, data[a as usize..b as usize]);
    }
}
