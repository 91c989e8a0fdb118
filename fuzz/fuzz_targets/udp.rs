//! UDP view and repr: no input panics, and emit/parse round-trips.
//!
//! Input: 4 bytes source address, 4 bytes destination address, then the datagram.
#![no_main]

use ackclock::wire::{Ipv4Addr, UdpPacket, UdpRepr};
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
    let datagram = &data[8..];

    let unchecked = UdpPacket::new_unchecked(datagram);
    let Ok(packet) = UdpPacket::new_checked(datagram) else {
        assert!(UdpRepr::parse(&unchecked, src, dst, false).is_err());
        assert!(UdpRepr::parse(&unchecked, src, dst, true).is_err());
        return;
    };

    // Every getter.
    let len = packet.len() as usize;
    assert!(8 <= len && len <= datagram.len());
    let _ = (packet.src_port(), packet.dst_port(), packet.checksum(), packet.header_sum());
    assert_eq!(packet.payload().len(), len - 8);
    let verified = packet.verify_checksum(src, dst);
    if packet.checksum() == 0 {
        assert!(verified);
    }

    assert_eq!(UdpRepr::parse(&packet, src, dst, true).is_ok(), verified);
    let repr = UdpRepr::parse(&packet, src, dst, false).expect("a checked datagram parses without the checksum");

    // Copy the payload into a fresh buffer, emit the header with a checksum, parse again.
    let payload = packet.payload();
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    buf[8..].copy_from_slice(payload);
    let mut out = UdpPacket::new_unchecked(&mut buf[..]);
    repr.emit(&mut out, src, dst, payload.len(), true);
    assert_ne!(out.checksum(), 0, "a computed zero is sent as 0xffff");
    let again = UdpPacket::new_checked(&buf[..]).expect("emitted datagram is valid");
    assert!(again.verify_checksum(src, dst));
    assert_eq!(UdpRepr::parse(&again, src, dst, true), Ok(repr));
    assert_eq!(again.payload(), payload);
    // A valid non-zero checksum comes back byte for byte, unless the sender used the other
    // representation of zero (0x0000 vs 0xffff can both verify only when the rest sums to
    // 0xffff, which makes the computed field 0 and so 0xffff on the wire).
    if verified && packet.checksum() != 0 {
        assert_eq!(buf[..], datagram[..len]);
    }
});
