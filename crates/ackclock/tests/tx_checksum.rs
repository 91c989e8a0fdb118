//! Transmit checksum offload (`Capabilities::tx_checksum`, a TAP's or TUN's virtio-net
//! header): the device completes the TCP checksum of every data segment, so the stack copies
//! the application's bytes without summing them and leaves each data segment marked
//! `CSUM_PARTIAL`, its checksum field holding the pseudo-header sum, as Linux hands a device
//! `CHECKSUM_PARTIAL` skbs. Segments without payload keep complete checksums (a header's sum
//! is cheaper than the flag's round trip).

mod common;

use ackclock::buf::{Flags, PBuf};
use ackclock::phy::Capabilities;
use ackclock::time::Duration;
use ackclock::wire::{checksum, IpProtocol, TcpFlags, TcpPacket};
use ackclock::Shutdown;
use common::script::{complete_checksum, seg, stack_config, tcp_config, Script, LOCAL, PEER, PEER_ISS};
use core::net::SocketAddrV4;

fn offload_script(caps: Capabilities) -> Script {
    let mut c = stack_config();
    c.tcp = tcp_config();
    Script::with_config(c, Capabilities { tx_checksum: true, ..caps })
}

/// What the stack put in its transmit ring, as handed to the device.
fn frames(t: &mut Script) -> Vec<PBuf> {
    t.stack.dispatch(t.now);
    let mut out = vec![];
    while let Some(f) = t.stack.tx_ring().pop() {
        out.push(f);
    }
    out
}

/// A data segment handed to the device: marked for it to complete the checksum at the TCP
/// header (`tcp_at`) and its field 16 bytes in, the field holding the pseudo-header sum
/// (RFC 9293 §3.1), the payload never summed (no cached sum), and once completed as a device
/// completes it, a checksum that verifies. Returns the payload length.
#[track_caller]
fn check_partial(f: &PBuf, tcp_at: usize) -> usize {
    let m = &f.meta;
    assert!(m.flags.contains(Flags::CSUM_PARTIAL), "left to the device: {:?}", m.flags);
    assert!(!m.flags.contains(Flags::GSO_TCPV4), "one segment, not cut by the device");
    assert!(!m.flags.contains(Flags::SUM_CACHED), "the payload was copied without its sum");
    assert_eq!((m.csum_start as usize, m.csum_offset), (tcp_at, 16));
    let tcp = &f.data()[tcp_at..];
    let field = u16::from_be_bytes([tcp[16], tcp[17]]);
    assert_eq!(field, checksum::pseudo_header(LOCAL, PEER, IpProtocol::TCP.0, tcp.len() as u16));
    let wire = complete_checksum(f);
    let p = TcpPacket::new_checked(&wire[tcp_at..]).expect("a TCP segment");
    assert!(p.verify_checksum(LOCAL, PEER), "completed by the device, the checksum verifies");
    p.payload().len()
}

/// A segment whose checksum the stack completed itself.
#[track_caller]
fn check_complete(f: &PBuf, tcp_at: usize) {
    assert!(!f.meta.flags.contains(Flags::CSUM_PARTIAL), "{:?}", f.meta.flags);
    let p = TcpPacket::new_checked(&f.data()[tcp_at..]).expect("a TCP segment");
    assert!(p.verify_checksum(LOCAL, PEER));
}

/// Over Ethernet (TCP header at byte 34) and over a TUN (byte 20): new data, one segment per
/// frame from the predicted transmit path (`fast_path_sends`), and its retransmission after
/// the RTO (RFC 6298 §5.4) from the general one (in a fresh buffer: the device still holds
/// the first), each leave the checksum to the device; the pure ACK of the peer's data is
/// complete.
#[test]
fn data_segments_leave_their_checksum_to_the_device() {
    for (caps, tcp_at) in [(Capabilities::ethernet(1500), 34), (Capabilities::ip(1500), 20)] {
        let mut t = offload_script(caps);
        let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
        let h = t.accept_with(l, seg("S").seq(PEER_ISS).win(65535).mss(1460));
        let data: Vec<u8> = (0..3 * 1460).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(t.stack.tcp_send(h, &data).unwrap(), data.len());
        let sent = frames(&mut t);
        assert_eq!(sent.len(), 3, "three full segments");
        let mut payload = vec![];
        for f in &sent {
            assert_eq!(check_partial(f, tcp_at), 1460);
            let wire = complete_checksum(f);
            payload.extend_from_slice(TcpPacket::new_checked(&wire[tcp_at..]).unwrap().payload());
        }
        assert_eq!(payload, data, "the bytes copied without a sum are the application's");
        assert_eq!(t.stack.counters().fast_path_sends, 3, "the predicted transmit path sent them");

        // No ACK comes: the first segment goes again after the RTO (1 s, RFC 6298 §2.1).
        t.now += Duration::from_millis(1100);
        let again = frames(&mut t);
        assert_eq!(again.len(), 1, "one retransmission");
        assert_eq!(check_partial(&again[0], tcp_at), 1460);
        assert_eq!(t.stack.counters().retransmitted, 1);
        // The first transmission is still held (`sent`): the payload moved to a buffer of its
        // own, copied without a sum too.
        assert_eq!(t.stack.counters().tx_copies, 1);

        // Two full segments from the peer are owed an ACK at once (RFC 5681 §4.2): no
        // payload, a complete checksum.
        t.inject_payload(1100, seg(".").seq(PEER_ISS + 1).ack(1).win(65535), &[1; 1460]);
        t.inject_payload(1100, seg(".").seq(PEER_ISS + 1 + 1460).ack(1).win(65535), &[2; 1460]);
        let acks = frames(&mut t);
        assert_eq!(acks.len(), 1, "one ACK for two segments");
        check_complete(&acks[0], tcp_at);
    }
}

/// The general path's other headers: a segment carrying SACK blocks (RFC 2018 §4: the
/// peer's out-of-order data is reported on every segment), the front of a segment cut to a
/// window that allows part of it (RFC 9293 §3.8.6.2.1), and the last data with the FIN.
/// Each leaves its checksum to the device.
#[test]
fn sack_blocks_a_cut_segment_and_the_fin_leave_it_to_the_device_too() {
    let mut t = offload_script(Capabilities::ethernet(1500));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    // A window of 2,000 bytes and no scaling: at most 2,000 ever offered.
    let h = t.accept_with(l, seg("S").seq(PEER_ISS).win(2000).mss(1460).sack_ok());

    // Data from the peer with a hole before it: the stack answers with a SACK block at once,
    // a header without payload, complete.
    t.inject_payload(1, seg(".").seq(PEER_ISS + 1 + 100).ack(1).win(2000), &[5; 200]);
    let dup = frames(&mut t);
    assert_eq!(dup.len(), 1);
    check_complete(&dup[0], 34);
    // While the hole lasts, the stack's data carries the block (a segment short enough to
    // leave room for it): not a plain header.
    t.stack.tcp_send(h, &[6; 1000]).unwrap();
    let sent = frames(&mut t);
    assert_eq!(sent.len(), 1);
    assert_eq!(check_partial(&sent[0], 34), 1000);
    let wire = complete_checksum(&sent[0]);
    let p = TcpPacket::new_checked(&wire[34..]).unwrap();
    assert_eq!(p.header_len(), 20 + 12, "one SACK block");
    assert_eq!(t.stack.counters().fast_path_sends, 0, "the general path built it");

    // The hole filled and the segment acknowledged, with a window of 1,000: the next
    // segment (1,460) is cut to the window, which is half the most ever offered.
    t.inject_payload(2, seg(".").seq(PEER_ISS + 1).ack(1001).win(2000), &[4; 100]);
    t.inject(2, seg(".").seq(PEER_ISS + 301).ack(1001).win(1000));
    let _ = frames(&mut t);
    t.stack.tcp_send(h, &[7; 1460]).unwrap();
    let cut = frames(&mut t);
    assert_eq!(cut.len(), 1, "one cut segment");
    assert_eq!(check_partial(&cut[0], 34), 1000);
    assert_eq!(t.stack.counters().tx_splits, 1);

    // Acknowledged with room: the rest goes; then the last bytes and the FIN in one segment.
    t.inject(3, seg(".").seq(PEER_ISS + 301).ack(2001).win(2000));
    let rest = frames(&mut t);
    assert_eq!(rest.len(), 1);
    assert_eq!(check_partial(&rest[0], 34), 460);
    t.stack.tcp_send(h, &[8; 100]).unwrap();
    t.stack.tcp_shutdown(h, Shutdown::Write).unwrap();
    let last = frames(&mut t);
    assert_eq!(last.len(), 1, "data and the FIN together");
    assert_eq!(check_partial(&last[0], 34), 100);
    let wire = complete_checksum(&last[0]);
    assert!(TcpPacket::new_checked(&wire[34..]).unwrap().flags().contains(TcpFlags::FIN));
}

/// Without the offload nothing changes: complete checksums, from the payload's sum cached by
/// the copy.
#[test]
fn without_the_offload_the_stack_completes_every_checksum() {
    let mut c = stack_config();
    c.tcp = tcp_config();
    let mut t = Script::with_config(c, Capabilities::ethernet(1500));
    let l = t.stack.tcp_listen(SocketAddrV4::new(LOCAL, 8080), 8).unwrap();
    let h = t.accept_with(l, seg("S").seq(PEER_ISS).win(65535).mss(1460));
    t.stack.tcp_send(h, &[9; 2 * 1460]).unwrap();
    let sent = frames(&mut t);
    assert_eq!(sent.len(), 2);
    for f in &sent {
        check_complete(f, 34);
        assert!(f.meta.flags.contains(Flags::SUM_CACHED), "summed during the copy");
    }
}
