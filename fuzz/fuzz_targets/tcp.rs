//! TCP view, options and repr: no input panics, and emit/parse round-trips.
//!
//! Input: 4 bytes source address, 4 bytes destination address, then the segment.
#![no_main]

use ackclock::wire::checksum;
use ackclock::wire::tcp::{MAX_HEADER_LEN, MAX_WINDOW_SCALE, TS_ONLY_PREFIX};
use ackclock::wire::{Ipv4Addr, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr};
use libfuzzer_sys::fuzz_target;

#[path = "../common/frames.rs"]
mod frames;

fuzz_target!(|data: &[u8]| {
    frames::parsed();
    if data.len() < 8 {
        return;
    }
    let src = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
    let dst = Ipv4Addr::new(data[4], data[5], data[6], data[7]);
    let segment = &data[8..];
    if segment.len() > usize::from(u16::MAX) {
        return; // not an IPv4 payload; the checksum length field cannot describe it
    }

    let Ok(packet) = TcpPacket::new_checked(segment) else {
        return;
    };

    // Every getter.
    let header_len = packet.header_len();
    assert!((20..=60).contains(&header_len) && header_len <= segment.len());
    let _ = (packet.src_port(), packet.dst_port(), packet.seq_number(), packet.ack_number());
    let flags = packet.flags();
    let _ = (packet.window_len(), packet.checksum(), packet.urgent_at());
    for i in 0..header_len / 4 {
        let _ = packet.word(i);
    }
    assert_eq!(packet.options().len(), header_len - 20);
    assert_eq!(packet.payload().len(), segment.len() - header_len);
    let syn_fin = flags.contains(TcpFlags::SYN) as usize + flags.contains(TcpFlags::FIN) as usize;
    assert_eq!(packet.segment_len(), packet.payload().len() + syn_fin);
    if let Some(ts) = packet.timestamps_fast() {
        assert_eq!(header_len, 32);
        assert_eq!(packet.word(5), TS_ONLY_PREFIX);
        assert_eq!(ts, (packet.word(6), packet.word(7)));
    }
    let verified = packet.verify_checksum(src, dst);
    let _ = packet.header_sum();

    // Iterate the options fully: at most one error, and only as the last item.
    let mut errors = 0;
    for option in TcpOptions::new(packet.options()) {
        assert_eq!(errors, 0, "option after an error");
        match option {
            Err(_) => errors += 1,
            Ok(TcpOption::WindowScale(shift)) => assert!(shift <= MAX_WINDOW_SCALE),
            Ok(TcpOption::Sack(blocks)) => assert!((1..=4).contains(&blocks.len())),
            Ok(_) => {}
        }
    }

    assert_eq!(TcpRepr::parse(&packet, src, dst, true).is_ok(), verified && errors == 0);
    let Ok(repr) = TcpRepr::parse(&packet, src, dst, false) else {
        assert!(errors > 0);
        return;
    };
    assert_eq!(repr.payload, packet.payload());

    // Emit into a fresh buffer, copy the payload with its sum, and parse it back.
    let emitted_header_len = repr.header_len();
    assert!(emitted_header_len <= MAX_HEADER_LEN && emitted_header_len % 4 == 0);
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut out = TcpPacket::new_unchecked(&mut buf[..]);
    repr.emit(&mut out, src, dst, false);
    let payload_sum = checksum::copy_and_sum(out.payload_mut(), repr.payload);
    out.fill_checksum_with_payload_sum(src, dst, payload_sum);
    let full = {
        let mut copy = buf.clone();
        TcpPacket::new_unchecked(&mut copy[..]).fill_checksum(src, dst);
        copy
    };
    assert_eq!(buf, full, "cached payload sum disagrees with the full checksum");

    let out = TcpPacket::new_checked(&buf[..]).expect("emitted segment rejected");
    assert_eq!(out.header_len(), emitted_header_len);
    let reparsed = TcpRepr::parse(&out, src, dst, true).expect("emitted segment does not parse");

    // Everything round-trips except SACK blocks that did not fit (dropped from the end).
    let mut expected = repr;
    expected.sack_blocks.truncate(repr.emitted_sack_blocks());
    assert_eq!(reparsed, expected);
    assert_eq!(reparsed.sack_blocks.as_slice(), &repr.sack_blocks.as_slice()[..repr.emitted_sack_blocks()]);

    // Emitting is canonical: the reparsed repr emits the same bytes.
    let mut again = vec![0u8; reparsed.buffer_len()];
    let mut again_packet = TcpPacket::new_unchecked(&mut again[..]);
    again_packet.set_header_len(reparsed.header_len());
    again_packet.payload_mut().copy_from_slice(reparsed.payload);
    reparsed.emit(&mut again_packet, src, dst, true);
    assert_eq!(again, buf);
});
