//! ARP view and repr: no input panics, and emit/parse round-trips.
//!
//! Input: the ARP packet (an Ethernet payload, possibly padded).
#![no_main]

use ackclock::wire::arp::PACKET_LEN;
use ackclock::wire::{ArpPacket, ArpRepr, EtherType};
use libfuzzer_sys::fuzz_target;

#[path = "../common/frames.rs"]
mod frames;

fuzz_target!(|data: &[u8]| {
    frames::parsed();
    let unchecked = ArpPacket::new_unchecked(data);
    let Ok(packet) = ArpPacket::new_checked(data) else {
        assert!(ArpRepr::parse(&unchecked).is_err());
        return;
    };

    // Every getter.
    let supported = packet.hardware_type() == 1
        && packet.protocol_type() == EtherType::IPV4
        && packet.hardware_len() == 6
        && packet.protocol_len() == 4;
    let _ = packet.operation().to_string();
    let _ = (packet.source_hardware_addr(), packet.source_protocol_addr());
    let _ = (packet.target_hardware_addr(), packet.target_protocol_addr());

    let parsed = ArpRepr::parse(&packet);
    assert_eq!(parsed.is_ok(), supported);
    let Ok(repr) = parsed else {
        return;
    };

    // Emit into a fresh buffer and parse again. Every field of a supported packet is in
    // the repr or fixed, so the bytes come back exactly.
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
    let again = ArpPacket::new_checked(&buf[..]).expect("emitted packet is valid");
    assert_eq!(ArpRepr::parse(&again), Ok(repr));
    assert_eq!(buf[..], data[..PACKET_LEN]);
});
