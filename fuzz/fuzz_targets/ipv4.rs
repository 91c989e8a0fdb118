//! IPv4 view and repr: no input panics, and emit/parse round-trips.
//!
//! Input: the IPv4 packet, possibly followed by link-layer padding.
#![no_main]

use ackclock::wire::{Ipv4Packet, Ipv4Repr};
use libfuzzer_sys::fuzz_target;

#[path = "../common/frames.rs"]
mod frames;

fuzz_target!(|data: &[u8]| {
    frames::parsed();
    let unchecked = Ipv4Packet::new_unchecked(data);
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        assert!(Ipv4Repr::parse(&unchecked, false).is_err());
        assert!(Ipv4Repr::parse(&unchecked, true).is_err());
        return;
    };

    // Every getter.
    assert_eq!(packet.version(), 4);
    let header_len = packet.header_len();
    let total_len = packet.total_len() as usize;
    assert!((20..=60).contains(&header_len) && header_len <= total_len && total_len <= data.len());
    assert!(packet.dscp() < 64 && packet.ecn() < 4);
    let _ = (packet.ident(), packet.dont_frag(), packet.ttl(), packet.protocol().to_string());
    let _ = (packet.checksum(), packet.src_addr(), packet.dst_addr());
    let (more, offset) = (packet.more_frags(), packet.frag_offset());
    assert_eq!(offset % 8, 0);
    assert_eq!(packet.is_fragment(), more || offset != 0);
    assert_eq!(packet.options().len(), header_len - 20);
    assert_eq!(packet.payload().len(), total_len - header_len);
    let verified = packet.verify_checksum();

    assert_eq!(Ipv4Repr::parse(&packet, true).is_ok(), verified);
    let repr = Ipv4Repr::parse(&packet, false).expect("a checked packet parses without the checksum");
    assert_eq!(repr.payload_len, packet.payload().len());
    assert_eq!(repr.fragment.is_some(), packet.is_fragment());

    // Emit (no options, checksum filled) into a fresh buffer, copy the payload, and parse
    // again, verifying the checksum.
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut out = Ipv4Packet::new_unchecked(&mut buf[..]);
    repr.emit(&mut out, true);
    out.payload_mut().copy_from_slice(packet.payload());
    let again = Ipv4Packet::new_checked(&buf[..]).expect("emitted packet is valid");
    assert!(again.verify_checksum());
    assert_eq!(again.header_len(), 20);
    assert_eq!(Ipv4Repr::parse(&again, true), Ok(repr));
    assert_eq!(again.payload(), packet.payload());
});
