//! Ethernet II frames (IEEE 802.3 clause 3.2.6 "Length/Type"), with at most one IEEE
//! 802.1Q VLAN tag.
//!
//! The frame check sequence is not part of the buffer: devices strip it on receive and
//! append it on transmit. A received frame may carry trailing padding up to the 60-byte
//! minimum (802.3 clause 4.2.3.3); this layer hands it up as payload and the network layer
//! trims it (IPv4 by its total length, ARP by its fixed size).

use core::fmt;

use super::{Error, Result};

/// Length of an untagged Ethernet II header: destination, source, type.
pub const HEADER_LEN: usize = 14;
/// Length of one 802.1Q tag: TPID and TCI (IEEE 802.1Q clause 9.3).
pub const VLAN_TAG_LEN: usize = 4;

mod field {
    use core::ops::Range;

    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    /// The type of an untagged frame, or the TPID of a tagged one.
    pub const TYPE: Range<usize> = 12..14;
    /// Tag control information, present when `TYPE` holds the 802.1Q TPID.
    pub const VLAN_TCI: Range<usize> = 14..16;
    /// The inner type of a tagged frame.
    pub const VLAN_TYPE: Range<usize> = 16..18;
}

/// The 12-bit VLAN identifier within the tag control information (IEEE 802.1Q clause 9.6).
const VID_MASK: u16 = 0x0fff;

/// A 48-bit IEEE 802 MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The all-ones broadcast address.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// Read an address from the first six bytes of `bytes`.
    ///
    /// # Panics
    /// If `bytes` is shorter than six bytes.
    #[inline]
    pub fn from_bytes(bytes: &[u8]) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&bytes[..6]);
        EthernetAddress(a)
    }

    /// The address as bytes, in transmission order.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether this is the broadcast address.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether this is a group address: the I/G bit, the least significant bit of the
    /// first octet, is set (IEEE 802 clause 8.2). Broadcast is a group address.
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether this is an individual (unicast) address: the I/G bit is clear.
    #[inline]
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

/// An EtherType. A newtype rather than an enum so that values this stack does not handle
/// round-trip unchanged. Values up to 1500 are 802.3 lengths, not types; they show up here
/// as unknown types and upper layers drop them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtherType(pub u16);

impl EtherType {
    /// Internet Protocol version 4 (RFC 894).
    pub const IPV4: EtherType = EtherType(0x0800);
    /// Address Resolution Protocol (RFC 826).
    pub const ARP: EtherType = EtherType(0x0806);
    /// The IEEE 802.1Q tag protocol identifier (C-VLAN).
    pub const VLAN: EtherType = EtherType(0x8100);
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EtherType::IPV4 => f.write_str("IPv4"),
            EtherType::ARP => f.write_str("ARP"),
            EtherType::VLAN => f.write_str("802.1Q"),
            EtherType(t) => write!(f, "0x{t:04x}"),
        }
    }
}

/// A read/write view of an Ethernet II frame, optionally 802.1Q-tagged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

view_buffer!(EthernetFrame);

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap `buffer` without checking it. Accessors may panic if it is too short; use
    /// [`new_checked`](Self::new_checked) for received frames.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wrap `buffer` and check that the header (with its VLAN tag, if any) fits, so that
    /// no accessor can panic.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Check that the buffer holds the whole header: 14 bytes, or 18 when the type field
    /// holds the 802.1Q TPID. Returns [`Error::Truncated`] otherwise.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.outer_type() == EtherType::VLAN && data.len() < HEADER_LEN + VLAN_TAG_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The type field at bytes 12..14: the TPID when the frame is tagged.
    #[inline]
    fn outer_type(&self) -> EtherType {
        EtherType(self.read_u16(field::TYPE))
    }

    #[inline]
    fn is_tagged(&self) -> bool {
        self.outer_type() == EtherType::VLAN
    }

    /// The destination address.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// The source address.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// The 12-bit VLAN identifier if the frame carries an 802.1Q tag (TPID 0x8100),
    /// ignoring the priority and DEI bits of the TCI. VID 0 (priority-tagged) is `Some(0)`.
    #[inline]
    pub fn vlan_id(&self) -> Option<u16> {
        if self.is_tagged() {
            Some(self.read_u16(field::VLAN_TCI) & VID_MASK)
        } else {
            None
        }
    }

    /// The type of the payload: for a tagged frame, the type after the tag. Exactly one
    /// tag is skipped; a second 0x8100 (stacked tags) comes back as [`EtherType::VLAN`]
    /// and is dropped upstream as unknown.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        if self.is_tagged() {
            EtherType(self.read_u16(field::VLAN_TYPE))
        } else {
            self.outer_type()
        }
    }

    /// Header length: 14, or 18 with a VLAN tag.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Everything after the header, including any trailing padding.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Set the payload type: in a tagged frame the type after the tag, so the tag stays.
    #[inline]
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        if self.is_tagged() {
            self.write_u16(field::VLAN_TYPE, ethertype.0);
        } else {
            self.write_u16(field::TYPE, ethertype.0);
        }
    }

    /// Tag the frame with VLAN `vid` (masked to 12 bits; priority and DEI zero) by writing
    /// the TPID and TCI at bytes 12..16. The payload type then belongs at bytes 16..18:
    /// call [`set_ethertype`](Self::set_ethertype) after this.
    ///
    /// # Panics
    /// If the buffer is shorter than 16 bytes.
    #[inline]
    pub fn set_vlan_id(&mut self, vid: u16) {
        self.write_u16(field::TYPE, EtherType::VLAN.0);
        self.write_u16(field::VLAN_TCI, vid & VID_MASK);
    }

    /// Everything after the header, mutably.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// The high-level content of an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC address.
    pub src_addr: EthernetAddress,
    /// Destination MAC address.
    pub dst_addr: EthernetAddress,
    /// The payload type (after the VLAN tag, if any).
    pub ethertype: EtherType,
    /// The 802.1Q VLAN ID (12 bits) when the frame is tagged.
    pub vlan_id: Option<u16>,
}

impl EthernetRepr {
    /// Read the header of `frame`. Re-checks the length, so an unchecked view cannot
    /// make this panic.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &EthernetFrame<&T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
            vlan_id: frame.vlan_id(),
        })
    }

    /// Header length that [`emit`](Self::emit) writes: 14, or 18 with a VLAN tag.
    #[inline]
    pub const fn header_len(&self) -> usize {
        if self.vlan_id.is_some() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Frame length for a payload of `payload_len` bytes (without 802.3 padding).
    #[inline]
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Write every header field into `frame`, with a VLAN tag (priority 0, VID masked to
    /// 12 bits) when `vlan_id` is `Some`. The payload is the caller's to write.
    ///
    /// # Panics
    /// If the buffer is shorter than [`header_len`](Self::header_len) (a caller bug).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        match self.vlan_id {
            Some(vid) => {
                frame.set_vlan_id(vid);
                frame.write_u16(field::VLAN_TYPE, self.ethertype.0);
            }
            None => frame.write_u16(field::TYPE, self.ethertype.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    const DST: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0xab, 0xcd, 0xef]);

    /// An untagged IPv4 frame header followed by 4 payload bytes.
    #[rustfmt::skip]
    static UNTAGGED: [u8; 18] = [
        0x02, 0x00, 0x00, 0xab, 0xcd, 0xef, // dst
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef,
    ];

    /// The same frame tagged with VLAN 100, priority 5 (TCI 0xa064), with 2 payload bytes.
    #[rustfmt::skip]
    static TAGGED: [u8; 20] = [
        0x02, 0x00, 0x00, 0xab, 0xcd, 0xef, // dst
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // src
        0x81, 0x00, // TPID
        0xa0, 0x64, // PCP 5, DEI 0, VID 100
        0x08, 0x06, // ARP
        0xca, 0xfe,
    ];

    #[test]
    fn address_classes_and_display() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(!EthernetAddress::BROADCAST.is_unicast());
        let mcast = EthernetAddress([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]);
        assert!(mcast.is_multicast() && !mcast.is_broadcast() && !mcast.is_unicast());
        assert!(SRC.is_unicast() && !SRC.is_multicast() && !SRC.is_broadcast());
        assert_eq!(SRC.to_string(), "52:54:00:12:34:56");
        assert_eq!(EthernetAddress::BROADCAST.to_string(), "ff:ff:ff:ff:ff:ff");
        assert_eq!(EtherType(0x86dd).to_string(), "0x86dd");
        assert_eq!(EtherType::IPV4.to_string(), "IPv4");
    }

    #[test]
    fn parse_untagged() {
        let frame = EthernetFrame::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!(frame.dst_addr(), DST);
        assert_eq!(frame.src_addr(), SRC);
        assert_eq!(frame.vlan_id(), None);
        assert_eq!(frame.ethertype(), EtherType::IPV4);
        assert_eq!(frame.header_len(), 14);
        assert_eq!(frame.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let repr = EthernetRepr::parse(&frame).unwrap();
        assert_eq!(repr, EthernetRepr { src_addr: SRC, dst_addr: DST, ethertype: EtherType::IPV4, vlan_id: None });
    }

    #[test]
    fn parse_tagged() {
        let frame = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(frame.vlan_id(), Some(100));
        assert_eq!(frame.ethertype(), EtherType::ARP);
        assert_eq!(frame.header_len(), 18);
        assert_eq!(frame.payload(), &[0xca, 0xfe]);
    }

    #[test]
    fn round_trip_untagged_and_tagged() {
        for vlan_id in [None, Some(0), Some(100), Some(0xfff)] {
            let repr = EthernetRepr { src_addr: SRC, dst_addr: DST, ethertype: EtherType(0x88cc), vlan_id };
            let mut buf = [0xffu8; 32];
            let len = repr.buffer_len(3);
            let mut frame = EthernetFrame::new_unchecked(&mut buf[..len]);
            repr.emit(&mut frame);
            frame.payload_mut().copy_from_slice(&[1, 2, 3]);
            let frame = EthernetFrame::new_checked(&buf[..len]).unwrap();
            assert_eq!(frame.header_len(), repr.header_len());
            assert_eq!(frame.payload(), &[1, 2, 3]);
            assert_eq!(EthernetRepr::parse(&frame).unwrap(), repr);
        }
    }

    #[test]
    fn emit_tag_bytes() {
        let repr = EthernetRepr { src_addr: SRC, dst_addr: DST, ethertype: EtherType::ARP, vlan_id: Some(100) };
        let mut buf = [0u8; 20];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        // Same as TAGGED except the priority bits, which emit leaves zero.
        assert_eq!(&buf[..14], &TAGGED[..14]);
        assert_eq!(&buf[14..18], &[0x00, 0x64, 0x08, 0x06]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for image in [&UNTAGGED[..], &TAGGED[..]] {
            let full = EthernetFrame::new_unchecked(image).header_len();
            for len in 0..full {
                let prefix = &image[..len];
                assert_eq!(EthernetFrame::new_checked(prefix).err(), Some(Error::Truncated));
                let unchecked = EthernetFrame::new_unchecked(prefix);
                assert_eq!(EthernetRepr::parse(&unchecked).err(), Some(Error::Truncated));
            }
            for len in full..=image.len() {
                assert!(EthernetFrame::new_checked(&image[..len]).is_ok());
            }
        }
    }

    #[test]
    fn setters_read_back() {
        let mut buf = UNTAGGED;
        let mut frame = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        frame.set_dst_addr(EthernetAddress::BROADCAST);
        frame.set_src_addr(DST);
        frame.set_ethertype(EtherType::ARP);
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(frame.src_addr(), DST);
        assert_eq!(frame.ethertype(), EtherType::ARP);
        frame.set_vlan_id(0x1234); // masked to 12 bits
        frame.set_ethertype(EtherType::IPV4);
        assert_eq!(frame.vlan_id(), Some(0x234));
        assert_eq!(frame.ethertype(), EtherType::IPV4);
        assert_eq!(frame.header_len(), 18);
        frame.payload_mut().fill(0);
        assert_eq!(frame.into_inner()[12..], [0x81, 0x00, 0x02, 0x34, 0x08, 0x00]);
    }
}
