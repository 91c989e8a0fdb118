//! Ethernet view and repr: no input panics, and emit/parse round-trips.
//!
//! Input: the frame.
#![no_main]

use ackclock::wire::ethernet::{HEADER_LEN, VLAN_TAG_LEN};
use ackclock::wire::{EtherType, EthernetFrame, EthernetRepr};
use libfuzzer_sys::fuzz_target;

#[path = "../common/frames.rs"]
mod frames;

fuzz_target!(|data: &[u8]| {
    frames::parsed();
    let unchecked = EthernetFrame::new_unchecked(data);
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        assert!(EthernetRepr::parse(&unchecked).is_err());
        return;
    };

    // Every getter.
    let (dst, src) = (frame.dst_addr(), frame.src_addr());
    let _ = (dst.is_broadcast(), dst.is_multicast(), dst.is_unicast(), src.to_string());
    let vlan_id = frame.vlan_id();
    let ethertype = frame.ethertype();
    let header_len = frame.header_len();
    assert_eq!(header_len, if vlan_id.is_some() { HEADER_LEN + VLAN_TAG_LEN } else { HEADER_LEN });
    assert!(vlan_id.is_none_or(|vid| vid <= 0x0fff));
    if vlan_id.is_none() {
        assert_ne!(ethertype, EtherType::VLAN);
    }
    assert_eq!(frame.payload().len(), data.len() - header_len);

    let repr = EthernetRepr::parse(&frame).expect("a checked frame parses");
    assert_eq!(repr.header_len(), header_len);

    // Emit into a fresh buffer, copy the payload, and parse again.
    let mut buf = vec![0u8; repr.buffer_len(frame.payload().len())];
    let mut out = EthernetFrame::new_unchecked(&mut buf[..]);
    repr.emit(&mut out);
    out.payload_mut().copy_from_slice(frame.payload());
    let again = EthernetFrame::new_checked(&buf[..]).expect("emitted frame is valid");
    assert_eq!(EthernetRepr::parse(&again), Ok(repr));
    assert_eq!(again.payload(), frame.payload());
    // Untagged headers come back byte for byte (a tag's priority bits are not kept).
    if vlan_id.is_none() {
        assert_eq!(buf[..], data[..]);
    }
});
