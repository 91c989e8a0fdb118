//! The SYN the flood examples (`synflood` on virtual time, `flood_raw` out of a real
//! interface) send: number `n` of a flood from spoofed sources in 198.18.0.0/15 (the
//! benchmarking range, RFC 2544), each with its own source address, port, sequence number and
//! timestamp, and the options a Linux client offers (MSS 1460, window scale 7, SACK-permitted,
//! timestamps).

use ackclock::wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, SackBlocks, TcpFlags,
    TcpPacket, TcpRepr,
};
use core::net::Ipv4Addr;

/// The Ethernet frame of flood SYN `n` to `dst`:`port` at `dst_mac`.
pub fn spoofed_syn(dst_mac: EthernetAddress, dst: Ipv4Addr, port: u16, n: u32) -> Vec<u8> {
    let src = Ipv4Addr::from(0xc612_0000 | (n.wrapping_mul(40503) & 0x1_ffff));
    let tcp = TcpRepr {
        src_port: 1024 + (n.wrapping_mul(7919) % 60000) as u16,
        dst_port: port,
        seq: n.wrapping_mul(2654435761),
        ack: 0,
        flags: TcpFlags::SYN,
        window: 64240,
        urgent: 0,
        max_seg_size: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some((n.wrapping_mul(1000), 0)),
        sack_blocks: SackBlocks::new(),
        payload: &[],
    };
    let tl = tcp.header_len();
    let eth = EthernetRepr {
        src_addr: EthernetAddress([2, 0, 0x5e, 0, 0, 0x99]),
        dst_addr: dst_mac,
        ethertype: EtherType::IPV4,
        vlan_id: None,
    };
    let mut buf = vec![0u8; 14 + 20 + tl];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..14]));
    Ipv4Repr::new(src, dst, IpProtocol::TCP, tl).emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..34]), true);
    tcp.emit(&mut TcpPacket::new_unchecked(&mut buf[34..]), src, dst, true);
    buf
}
