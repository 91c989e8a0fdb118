//! ARP (RFC 826) for Ethernet hardware and IPv4 only.
//!
//! The view reads the fields at the fixed offsets of the Ethernet/IPv4 layout (hardware
//! length 6, protocol length 4: 28 bytes). [`ArpRepr::parse`] rejects every other
//! hardware/protocol combination as [`Error::Unsupported`], so the fixed offsets are only
//! trusted after it has checked the lengths.

use core::fmt;

use super::ethernet::{EtherType, EthernetAddress};
use super::{Error, Ipv4Addr, Result};

/// Length of an Ethernet/IPv4 ARP packet. Bytes after it (Ethernet padding) are ignored.
pub const PACKET_LEN: usize = 28;

/// `ar$hrd` for Ethernet (RFC 826; IANA "Hardware Types").
pub const HARDWARE_ETHERNET: u16 = 1;

mod field {
    use core::ops::Range;

    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// An ARP opcode (`ar$op`). A newtype so that unknown opcodes round-trip; the stack
/// answers only [`REQUEST`](Self::REQUEST) and learns from both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    /// `ares_op$REQUEST` (RFC 826).
    pub const REQUEST: ArpOperation = ArpOperation(1);
    /// `ares_op$REPLY` (RFC 826).
    pub const REPLY: ArpOperation = ArpOperation(2);
}

impl fmt::Display for ArpOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArpOperation::REQUEST => f.write_str("request"),
            ArpOperation::REPLY => f.write_str("reply"),
            ArpOperation(op) => write!(f, "op {op}"),
        }
    }
}

/// A read/write view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_buffer!(ArpPacket);

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wrap `buffer` without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }

    /// Wrap `buffer` and check that it holds the 28 bytes every accessor reads.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] if the buffer is shorter than [`PACKET_LEN`].
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < PACKET_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Hardware address space (`ar$hrd`); 1 for Ethernet.
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        self.read_u16(field::HTYPE)
    }

    /// Protocol address space (`ar$pro`), an EtherType; 0x0800 for IPv4.
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(self.read_u16(field::PTYPE))
    }

    /// Hardware address length (`ar$hln`).
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length (`ar$pln`).
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Opcode (`ar$op`).
    #[inline]
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(self.read_u16(field::OPER))
    }

    /// Sender hardware address (`ar$sha`).
    #[inline]
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SHA])
    }

    /// Sender protocol address (`ar$spa`).
    #[inline]
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        self.read_ipv4(field::SPA)
    }

    /// Target hardware address (`ar$tha`); ignored in requests.
    #[inline]
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::THA])
    }

    /// Target protocol address (`ar$tpa`).
    #[inline]
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        self.read_ipv4(field::TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Set `ar$hrd`.
    #[inline]
    pub fn set_hardware_type(&mut self, value: u16) {
        self.write_u16(field::HTYPE, value);
    }

    /// Set `ar$pro`.
    #[inline]
    pub fn set_protocol_type(&mut self, value: EtherType) {
        self.write_u16(field::PTYPE, value.0);
    }

    /// Set `ar$hln`.
    #[inline]
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Set `ar$pln`.
    #[inline]
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Set `ar$op`.
    #[inline]
    pub fn set_operation(&mut self, value: ArpOperation) {
        self.write_u16(field::OPER, value.0);
    }

    /// Set `ar$sha`.
    #[inline]
    pub fn set_source_hardware_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&value.0);
    }

    /// Set `ar$spa`.
    #[inline]
    pub fn set_source_protocol_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&value.octets());
    }

    /// Set `ar$tha`.
    #[inline]
    pub fn set_target_hardware_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&value.0);
    }

    /// Set `ar$tpa`.
    #[inline]
    pub fn set_target_protocol_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&value.octets());
    }
}

/// The high-level content of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Opcode (`ar$op`): request, reply, or another value carried through.
    pub operation: ArpOperation,
    /// Sender hardware address (`ar$sha`).
    pub source_hardware_addr: EthernetAddress,
    /// Sender protocol address (`ar$spa`).
    pub source_protocol_addr: Ipv4Addr,
    /// Target hardware address (`ar$tha`); not meaningful in a request (RFC 826).
    pub target_hardware_addr: EthernetAddress,
    /// Target protocol address (`ar$tpa`).
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Read `packet`. [`Error::Truncated`] if shorter than 28 bytes;
    /// [`Error::Unsupported`] unless it is Ethernet (`ar$hrd` 1, `ar$hln` 6) over IPv4
    /// (`ar$pro` 0x0800, `ar$pln` 4): RFC 826 says to drop what we do not speak. Any
    /// opcode is accepted; the caller acts on REQUEST and REPLY only.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &ArpPacket<&T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if packet.hardware_type() != HARDWARE_ETHERNET
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        Ok(ArpRepr {
            operation: packet.operation(),
            source_hardware_addr: packet.source_hardware_addr(),
            source_protocol_addr: packet.source_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: always [`PACKET_LEN`].
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Write all 28 bytes of the packet.
    ///
    /// # Panics
    /// If the buffer is shorter than [`PACKET_LEN`] (a caller bug).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_hardware_type(HARDWARE_ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(self.source_hardware_addr);
        packet.set_source_protocol_addr(self.source_protocol_addr);
        packet.set_target_hardware_addr(self.target_hardware_addr);
        packet.set_target_protocol_addr(self.target_protocol_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::super::ethernet::{EthernetFrame, EthernetRepr};
    use super::*;

    /// "who-has 192.168.1.1 tell 192.168.1.20" as a Linux host sends it (arp_solicit():
    /// broadcast destination, target hardware address all zeros), from a virtio NIC with
    /// QEMU's 52:54:00 OUI. The kernel hands the device 42 bytes; the minimum-frame padding
    /// to 60 bytes (802.3 clause 4.2.3.3) is 18 zero bytes, which is what a receiver sees.
    #[rustfmt::skip]
    static ARP_REQUEST_FRAME: [u8; 60] = [
        // Ethernet: dst ff:ff:ff:ff:ff:ff, src 52:54:00:12:34:56, type ARP
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06,
        // ARP: htype 1, ptype 0x0800, hlen 6, plen 4, op 1 (request)
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01,
        // sha 52:54:00:12:34:56, spa 192.168.1.20
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0xc0, 0xa8, 0x01, 0x14,
        // tha 00:00:00:00:00:00, tpa 192.168.1.1
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01,
        // 18 bytes of Ethernet padding
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    const HOST_MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

    fn request_repr() -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: HOST_MAC,
            source_protocol_addr: Ipv4Addr::new(192, 168, 1, 20),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(192, 168, 1, 1),
        }
    }

    #[test]
    fn parse_linux_request() {
        let frame = EthernetFrame::new_checked(&ARP_REQUEST_FRAME[..]).unwrap();
        let eth = EthernetRepr::parse(&frame).unwrap();
        assert!(eth.dst_addr.is_broadcast());
        assert_eq!(eth.src_addr, HOST_MAC);
        assert_eq!(eth.ethertype, EtherType::ARP);
        // The payload is 46 bytes; the 18 trailing zeros are padding ARP ignores.
        assert_eq!(frame.payload().len(), 46);
        let packet = ArpPacket::new_checked(frame.payload()).unwrap();
        assert_eq!(packet.hardware_type(), 1);
        assert_eq!(packet.protocol_type(), EtherType::IPV4);
        assert_eq!((packet.hardware_len(), packet.protocol_len()), (6, 4));
        assert_eq!(ArpRepr::parse(&packet).unwrap(), request_repr());
    }

    #[test]
    fn round_trip() {
        let reply = ArpRepr {
            operation: ArpOperation::REPLY,
            source_hardware_addr: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            source_protocol_addr: Ipv4Addr::new(192, 168, 1, 1),
            target_hardware_addr: HOST_MAC,
            target_protocol_addr: Ipv4Addr::new(192, 168, 1, 20),
        };
        for repr in [request_repr(), reply, ArpRepr { operation: ArpOperation(9), ..reply }] {
            let mut buf = [0xaau8; PACKET_LEN];
            repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
            let packet = ArpPacket::new_checked(&buf[..]).unwrap();
            assert_eq!(ArpRepr::parse(&packet).unwrap(), repr);
        }
        // emit reproduces the Linux request byte for byte.
        let mut buf = [0u8; PACKET_LEN];
        request_repr().emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf[..], ARP_REQUEST_FRAME[14..42]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let arp = &ARP_REQUEST_FRAME[14..42];
        for len in 0..PACKET_LEN {
            assert_eq!(ArpPacket::new_checked(&arp[..len]).err(), Some(Error::Truncated));
            let unchecked = ArpPacket::new_unchecked(&arp[..len]);
            assert_eq!(ArpRepr::parse(&unchecked).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn non_ethernet_ipv4_is_unsupported() {
        let mut buf = [0u8; PACKET_LEN];
        buf.copy_from_slice(&ARP_REQUEST_FRAME[14..42]);
        let cases: [fn(&mut ArpPacket<&mut [u8]>); 4] = [
            |p| p.set_hardware_type(6), // IEEE 802 networks
            |p| p.set_protocol_type(EtherType(0x86dd)),
            |p| p.set_hardware_len(8),
            |p| p.set_protocol_len(16),
        ];
        for mutate in cases {
            let mut copy = buf;
            mutate(&mut ArpPacket::new_unchecked(&mut copy[..]));
            let packet = ArpPacket::new_checked(&copy[..]).unwrap();
            assert_eq!(ArpRepr::parse(&packet), Err(Error::Unsupported));
        }
    }

    #[test]
    fn setters_read_back() {
        let mut buf = [0u8; PACKET_LEN];
        let mut p = ArpPacket::new_unchecked(&mut buf[..]);
        p.set_hardware_type(0x0102);
        p.set_protocol_type(EtherType(0x0304));
        p.set_hardware_len(5);
        p.set_protocol_len(7);
        p.set_operation(ArpOperation::REPLY);
        p.set_source_hardware_addr(EthernetAddress([1, 2, 3, 4, 5, 6]));
        p.set_source_protocol_addr(Ipv4Addr::new(10, 0, 0, 1));
        p.set_target_hardware_addr(EthernetAddress([7, 8, 9, 10, 11, 12]));
        p.set_target_protocol_addr(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(p.hardware_type(), 0x0102);
        assert_eq!(p.protocol_type(), EtherType(0x0304));
        assert_eq!((p.hardware_len(), p.protocol_len()), (5, 7));
        assert_eq!(p.operation(), ArpOperation::REPLY);
        assert_eq!(p.source_hardware_addr(), EthernetAddress([1, 2, 3, 4, 5, 6]));
        assert_eq!(p.source_protocol_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.target_hardware_addr(), EthernetAddress([7, 8, 9, 10, 11, 12]));
        assert_eq!(p.target_protocol_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(ArpOperation::REPLY.to_string(), "reply");
    }
}
