//! ICMPv4 view and repr: no input panics, and emit/parse round-trips.
//!
//! Input: the ICMP message (an IPv4 payload).
#![no_main]

use ackclock::wire::{Icmpv4Packet, Icmpv4Repr};
use libfuzzer_sys::fuzz_target;

#[path = "../common/frames.rs"]
mod frames;

fuzz_target!(|data: &[u8]| {
    frames::parsed();
    let unchecked = Icmpv4Packet::new_unchecked(data);
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        assert!(Icmpv4Repr::parse(&unchecked).is_err());
        return;
    };

    // Every getter.
    let _ = (packet.msg_type().to_string(), packet.msg_code(), packet.checksum());
    let _ = (packet.echo_ident(), packet.echo_seq_no(), packet.next_hop_mtu());
    assert_eq!(packet.data().len(), data.len() - 8);
    let verified = packet.verify_checksum();

    let Ok(repr) = Icmpv4Repr::parse(&packet) else {
        return;
    };
    assert!(verified);
    assert!(repr.buffer_len() <= data.len());

    // Emit into a fresh buffer (emit copies the data and fills the checksum) and parse again.
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
    let again = Icmpv4Packet::new_checked(&buf[..]).expect("emitted message is long enough");
    assert!(again.verify_checksum());
    assert_eq!(Icmpv4Repr::parse(&again), Ok(repr));
    assert_eq!(again.msg_type(), packet.msg_type());
    assert_eq!(again.msg_code(), packet.msg_code());
});
