//! The scripted peer the instruction-count examples (`rxpath`, `txpath`) share: it builds
//! the frames a peer at 10.0.0.2:40000 sends the stack under test at 10.0.0.1:80, over
//! Ethernet or a link without a link header.

use ackclock::buf::{PBuf, Pool};
use ackclock::wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, SackBlocks, TcpFlags,
    TcpPacket, TcpRepr,
};
use core::net::Ipv4Addr;

pub const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
pub const PEER_ISS: u32 = 1_000_000;
pub const MSS: usize = 1448;

pub struct Peer {
    pub pool: Pool,
    pub stack_mac: EthernetAddress,
    /// Link header length: 14 (Ethernet) or 0 (TUN).
    pub link: usize,
}

impl Peer {
    #[allow(clippy::too_many_arguments)]
    pub fn frame(
        &self,
        seq: u32,
        ack: u32,
        flags: TcpFlags,
        ts: Option<(u32, u32)>,
        ws: Option<u8>,
        payload: usize,
    ) -> PBuf {
        let body = vec![0x42u8; payload];
        let tcp = TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq,
            ack,
            flags,
            window: 65535,
            urgent: 0,
            max_seg_size: flags.contains(TcpFlags::SYN).then_some(1460),
            window_scale: ws,
            sack_permitted: false,
            timestamps: ts,
            sack_blocks: SackBlocks::new(),
            payload: &body,
        };
        let tl = tcp.header_len() + payload;
        let ip = Ipv4Repr::new(PEER, LOCAL, IpProtocol::TCP, tl);
        let eth =
            EthernetRepr { src_addr: PEER_MAC, dst_addr: self.stack_mac, ethertype: EtherType::IPV4, vlan_id: None };
        let mut b = self.pool.alloc().expect("peer pool");
        let l = self.link;
        let buf = b.append(l + 20 + tl).expect("frame fits");
        if l > 0 {
            eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..14]));
        }
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[l..l + 20]), true);
        let hl = tcp.header_len();
        buf[l + 20 + hl..].copy_from_slice(&body);
        tcp.emit(&mut TcpPacket::new_unchecked(&mut buf[l + 20..]), PEER, LOCAL, true);
        b
    }
}
