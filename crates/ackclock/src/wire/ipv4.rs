//! IPv4 headers (RFC 791 §3.1).
//!
//! Options are skipped by the header length, not parsed (RFC 1122 §3.2.1.8 lets a host
//! ignore the ones it does not implement). Fragments are parsed and flagged in
//! [`Ipv4Repr::fragment`], not reassembled: the caller decides what to do with them.

use core::fmt;

use super::checksum;
use super::{Error, Ipv4Addr, Result};

/// Length of a header without options (IHL 5). [`Ipv4Repr::emit`] writes exactly this.
pub const HEADER_LEN: usize = 20;

/// Largest header: IHL is 4 bits of 32-bit words (RFC 791 §3.1).
pub const MAX_HEADER_LEN: usize = 60;

mod field {
    use core::ops::Range;

    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Flags and fragment offset word (RFC 791 §3.1): bit 15 reserved, 14 DF, 13 MF, then
/// the offset in 8-byte units.
const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// An IP protocol number (IANA "Assigned Internet Protocol Numbers"). A newtype so that
/// unknown protocols round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// ICMP (RFC 792).
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// TCP (RFC 9293).
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP (RFC 768).
    pub const UDP: IpProtocol = IpProtocol(17);
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IpProtocol::ICMP => f.write_str("ICMP"),
            IpProtocol::TCP => f.write_str("TCP"),
            IpProtocol::UDP => f.write_str("UDP"),
            IpProtocol(p) => write!(f, "protocol {p}"),
        }
    }
}

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

view_buffer!(Ipv4Packet);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap `buffer` without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wrap `buffer` and validate the version and both length fields (see
    /// [`check_len`](Self::check_len)), so that no accessor can panic.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// In order: fewer than 20 bytes is [`Error::Truncated`]; version not 4 is
    /// [`Error::BadVersion`]; IHL < 5 is [`Error::BadHeaderLength`] (RFC 791 §3.1: the
    /// minimum header is 5 words); a header longer than the buffer is
    /// [`Error::Truncated`]; a total length shorter than the header is
    /// [`Error::BadLength`]; a total length longer than the buffer is [`Error::Truncated`].
    /// A buffer longer than the total length is fine: the excess is link-layer padding.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadVersion);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::BadHeaderLength);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        let total_len = self.total_len() as usize;
        if total_len < header_len {
            return Err(Error::BadLength);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Version (the high nibble of byte 0).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize * 4
    }

    /// Differentiated services code point (RFC 2474 §3): the high 6 bits of byte 1.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (RFC 3168 §5): the low 2 bits of byte 1.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length of header and data, in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        self.read_u16(field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        self.read_u16(field::IDENT)
    }

    /// The Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.read_u16(field::FLG_OFF) & FLAG_DF != 0
    }

    /// The More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.read_u16(field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.read_u16(field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// Whether this is a fragment of a larger datagram (RFC 791 §3.2): MF set or a
    /// non-zero offset.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.read_u16(field::FLG_OFF) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        self.read_ipv4(field::SRC_ADDR)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        self.read_ipv4(field::DST_ADDR)
    }

    /// The option bytes, between the fixed header and `header_len`. Not interpreted.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The data: bytes from `header_len` to `total_len`. Anything past the total length
    /// (Ethernet minimum-frame padding) is excluded.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len() as usize]
    }

    /// Whether the header checksum verifies (RFC 791 §3.1: the ones' complement sum of
    /// the header, checksum included, is all ones).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        let header = &self.buffer.as_ref()[..self.header_len()];
        checksum::sum(header) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    #[inline]
    fn set_flg_off(&mut self, mask: u16, bits: u16) {
        let word = (self.read_u16(field::FLG_OFF) & !mask) | (bits & mask);
        self.write_u16(field::FLG_OFF, word);
    }

    /// Set the version nibble.
    #[inline]
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Set the header length in bytes; stored as IHL = `len / 4` (so a multiple of 4
    /// from 20 to 60 is expected).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Set the DSCP (6 bits).
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    /// Set the ECN field (2 bits).
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Set the total length.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        self.write_u16(field::LENGTH, len);
    }

    /// Set the identification.
    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        self.write_u16(field::IDENT, ident);
    }

    /// Set or clear Don't Fragment.
    #[inline]
    pub fn set_dont_frag(&mut self, value: bool) {
        self.set_flg_off(FLAG_DF, if value { FLAG_DF } else { 0 });
    }

    /// Set or clear More Fragments.
    #[inline]
    pub fn set_more_frags(&mut self, value: bool) {
        self.set_flg_off(FLAG_MF, if value { FLAG_MF } else { 0 });
    }

    /// Set the fragment offset in bytes; stored in 8-byte units, so the low 3 bits are
    /// dropped (RFC 791 §3.1: fragments other than the last are multiples of 8 bytes).
    #[inline]
    pub fn set_frag_offset(&mut self, offset: u16) {
        self.set_flg_off(OFFSET_MASK, offset >> 3);
    }

    /// Set the time to live.
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Set the protocol.
    #[inline]
    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.0;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        self.write_u16(field::CHECKSUM, value);
    }

    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Compute and store the header checksum over `header_len` bytes.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = self.header_len();
        let sum = checksum::sum(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(checksum::finish(sum));
    }

    /// The option bytes, mutably.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The data between `header_len` and `total_len`, mutably.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), self.total_len() as usize);
        &mut self.buffer.as_mut()[start..end]
    }
}

/// Where a fragment sits in its datagram (RFC 791 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// More Fragments: this is not the last fragment.
    pub more: bool,
    /// Offset of this fragment's data in the datagram, in bytes (a multiple of 8).
    pub offset: u16,
}

/// The high-level content of an IPv4 header. Options are not represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload (6 for TCP).
    pub protocol: IpProtocol,
    /// Length of the data after the header (total length − header length).
    pub payload_len: usize,
    /// Time to live: hops left before a router discards the packet.
    pub ttl: u8,
    /// Identification, shared by the fragments of one datagram (RFC 791 §3.1).
    pub ident: u16,
    /// Don't Fragment: routers must drop the packet rather than fragment it.
    pub dont_frag: bool,
    /// The whole second byte: DSCP (high 6 bits) and ECN (low 2 bits).
    pub dscp_ecn: u8,
    /// `Some` when the packet is a fragment (MF set or offset non-zero). The stack does
    /// not reassemble: callers flag or drop these.
    pub fragment: Option<Fragment>,
}

impl Ipv4Repr {
    /// An unfragmented datagram from `src_addr` to `dst_addr` carrying `payload_len` bytes
    /// of `protocol`, with the usual header: TTL 64 (RFC 1700's recommended default), ident
    /// 0, don't-fragment set, DSCP and ECN 0. Set the fields to vary any of these.
    #[inline]
    pub const fn new(src_addr: Ipv4Addr, dst_addr: Ipv4Addr, protocol: IpProtocol, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src_addr,
            dst_addr,
            protocol,
            payload_len,
            ttl: 64,
            ident: 0,
            dont_frag: true,
            dscp_ecn: 0,
            fragment: None,
        }
    }

    /// Read the header of `packet`, re-checking its lengths (so an unchecked view cannot
    /// make this panic) and, when `verify_checksum` is true, its checksum
    /// ([`Error::BadChecksum`]). Pass `false` when the device has already verified it
    /// (receive checksum offload). Options are skipped; fragments are returned with
    /// `fragment` set.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Ipv4Packet<&T>, verify_checksum: bool) -> Result<Ipv4Repr> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let fragment = if packet.is_fragment() {
            Some(Fragment { more: packet.more_frags(), offset: packet.frag_offset() })
        } else {
            None
        };
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.total_len() as usize - packet.header_len(),
            ttl: packet.ttl(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            dscp_ecn: packet.buffer.as_ref()[field::DSCP_ECN],
            fragment,
        })
    }

    /// Header length [`emit`](Self::emit) writes: always 20 (no options).
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write a 20-byte header (IHL 5, no options, reserved flag clear) with total length
    /// `20 + payload_len`, and the checksum when `fill_checksum` is true (else zero, for
    /// a device with transmit checksum offload). The payload is the caller's to write.
    ///
    /// `payload_len` must be at most 65515 (the total length is 16 bits); larger values
    /// are a caller bug (debug assertion; truncated in release).
    ///
    /// # Panics
    /// If the buffer is shorter than 20 bytes (a caller bug).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>, fill_checksum: bool) {
        debug_assert!(self.payload_len <= u16::MAX as usize - HEADER_LEN);
        let buf = packet.buffer.as_mut();
        buf[field::VER_IHL] = 0x40 | (HEADER_LEN / 4) as u8;
        buf[field::DSCP_ECN] = self.dscp_ecn;
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(self.ident);
        let mut flg_off = if self.dont_frag { FLAG_DF } else { 0 };
        if let Some(frag) = self.fragment {
            if frag.more {
                flg_off |= FLAG_MF;
            }
            flg_off |= (frag.offset >> 3) & OFFSET_MASK;
        }
        packet.write_u16(field::FLG_OFF, flg_off);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        if fill_checksum {
            packet.fill_checksum();
        } else {
            packet.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::checksum;
    use super::super::ethernet::{EtherType, EthernetFrame};
    use super::*;

    /// A pure ACK from 192.168.1.1:22 to 192.168.1.20:51514 (IPv4 header 20 bytes, TCP
    /// header 20 bytes, no options, DF set as Linux does for PMTU discovery, TTL 64) in a
    /// minimum-size Ethernet frame. 14 + 40 = 54 bytes, so the sender's NIC pads it with 6
    /// zero bytes to the 60-byte minimum (802.3 clause 4.2.3.3). Both checksums are real.
    #[rustfmt::skip]
    static ACK_FRAME: [u8; 60] = [
        // Ethernet: dst 52:54:00:12:34:56, src 02:00:00:00:00:01, type IPv4
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
        // IPv4: ver 4 IHL 5, tos 0, total 40, ident 0, DF, TTL 64, TCP, checksum 0xb76a
        0x45, 0x00, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0xb7, 0x6a,
        // src 192.168.1.1, dst 192.168.1.20
        0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x14,
        // TCP: ports 22 -> 51514, seq 0x1a2b3c4d, ack 0x5e6f7081
        0x00, 0x16, 0xc9, 0x3a, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81,
        // data offset 5, flags ACK, window 501, checksum 0x3bc0, urgent 0
        0x50, 0x10, 0x01, 0xf5, 0x3b, 0xc0, 0x00, 0x00,
        // Ethernet padding
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn ack_ip() -> &'static [u8] {
        &ACK_FRAME[14..]
    }

    /// The IPv4 header of [`ACK_FRAME`] with IHL 7: an 8-byte option area holding a
    /// Record Route-like option padded by End of Option List, inserted before the TCP
    /// header; total length 48. The checksum (0xaa5b) is recomputed for the longer header.
    #[rustfmt::skip]
    static WITH_OPTIONS: [u8; 28] = [
        0x47, 0x00, 0x00, 0x30, 0x00, 0x00, 0x40, 0x00, 0x40, 0x06, 0xaa, 0x5b, //
        0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x14, //
        0x07, 0x07, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, // RR: type 7, len 7, ptr 4; EOL
    ];

    fn with_options_packet() -> [u8; 48] {
        let mut buf = [0u8; 48];
        buf[..28].copy_from_slice(&WITH_OPTIONS);
        buf[28..].copy_from_slice(&ack_ip()[20..40]);
        buf
    }

    #[test]
    fn parse_padded_pure_ack() {
        let frame = EthernetFrame::new_checked(&ACK_FRAME[..]).unwrap();
        assert_eq!(frame.ethertype(), EtherType::IPV4);
        assert_eq!(frame.payload().len(), 46); // 40 bytes of IPv4 + 6 of padding
        let packet = Ipv4Packet::new_checked(frame.payload()).unwrap();
        assert!(packet.verify_checksum());
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.total_len(), 40);
        assert_eq!((packet.dscp(), packet.ecn()), (0, 0));
        assert!(packet.dont_frag() && !packet.more_frags() && !packet.is_fragment());
        assert_eq!(packet.frag_offset(), 0);
        assert_eq!(packet.ttl(), 64);
        assert_eq!(packet.protocol(), IpProtocol::TCP);
        assert_eq!(packet.checksum(), 0xb76a);
        assert!(packet.options().is_empty());
        // The payload is the TCP header only: the padding is cut by the total length.
        assert_eq!(packet.payload(), &ACK_FRAME[34..54]);
        let repr = Ipv4Repr::parse(&packet, true).unwrap();
        assert_eq!(
            repr,
            Ipv4Repr {
                src_addr: Ipv4Addr::new(192, 168, 1, 1),
                dst_addr: Ipv4Addr::new(192, 168, 1, 20),
                protocol: IpProtocol::TCP,
                payload_len: 20,
                ttl: 64,
                ident: 0,
                dont_frag: true,
                dscp_ecn: 0,
                fragment: None,
            }
        );
        // The TCP checksum in the image is real too (RFC 9293 §3.1 pseudo-header).
        let tcp_sum = checksum::add(
            checksum::pseudo_header(repr.src_addr, repr.dst_addr, 6, 20),
            checksum::sum(packet.payload()),
        );
        assert_eq!(tcp_sum, 0xffff);
    }

    #[test]
    fn round_trip_reproduces_real_header() {
        let packet = Ipv4Packet::new_checked(ack_ip()).unwrap();
        let repr = Ipv4Repr::parse(&packet, true).unwrap();
        let mut buf = [0u8; 40];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), true);
        assert_eq!(buf[..20], ack_ip()[..20]);
        let again = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&again, true).unwrap(), repr);
    }

    #[test]
    fn round_trip_varied() {
        let base = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(255, 255, 255, 255),
            protocol: IpProtocol(253),
            payload_len: 7,
            ttl: 1,
            ident: 0xfffe,
            dont_frag: false,
            dscp_ecn: 0xb9, // DSCP 46 (EF), ECN 1 (ECT(1))
            fragment: None,
        };
        let fragments = [
            None,
            Some(Fragment { more: true, offset: 0 }),
            Some(Fragment { more: true, offset: 1480 }),
            Some(Fragment { more: false, offset: 65528 }),
        ];
        for fragment in fragments {
            for fill in [true, false] {
                let repr = Ipv4Repr { fragment, ..base };
                let mut buf = [0x5au8; 27];
                assert_eq!(repr.buffer_len(), buf.len());
                repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), fill);
                let packet = Ipv4Packet::new_checked(&buf[..]).unwrap();
                assert_eq!((packet.dscp(), packet.ecn()), (46, 1));
                assert_eq!(packet.is_fragment(), fragment.is_some());
                assert_eq!(packet.verify_checksum(), fill);
                assert_eq!(Ipv4Repr::parse(&packet, fill).unwrap(), repr);
            }
        }
    }

    #[test]
    fn options_are_skipped() {
        let buf = with_options_packet();
        let packet = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(packet.verify_checksum());
        assert_eq!(packet.header_len(), 28);
        assert_eq!(packet.options(), &[0x07, 0x07, 0x04, 0, 0, 0, 0, 0]);
        assert_eq!(packet.payload(), &ack_ip()[20..40]);
        let repr = Ipv4Repr::parse(&packet, true).unwrap();
        assert_eq!(repr.payload_len, 20);
        assert_eq!(repr.src_addr, Ipv4Addr::new(192, 168, 1, 1));
        // Re-emitted without options: the same repr, a 20-byte header.
        let mut out = [0u8; 40];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]), true);
        assert_eq!(out[..20], ack_ip()[..20]);
        // IHL 6: a single 4-byte option word (Router Alert, RFC 2113).
        let mut buf6 = [0u8; 24];
        buf6[..20].copy_from_slice(&ack_ip()[..20]);
        buf6[20..].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]);
        let mut p = Ipv4Packet::new_unchecked(&mut buf6[..]);
        p.set_header_len(24);
        p.set_total_len(24);
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&buf6[..]).unwrap();
        assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert!(p.payload().is_empty());
        assert_eq!(Ipv4Repr::parse(&p, true).unwrap().payload_len, 0);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let opts = with_options_packet();
        for image in [ack_ip(), &opts[..]] {
            let total = Ipv4Packet::new_unchecked(image).total_len() as usize;
            for len in 0..total {
                let prefix = &image[..len];
                assert_eq!(Ipv4Packet::new_checked(prefix).err(), Some(Error::Truncated));
                let unchecked = Ipv4Packet::new_unchecked(prefix);
                assert_eq!(Ipv4Repr::parse(&unchecked, true).err(), Some(Error::Truncated));
            }
            assert!(Ipv4Packet::new_checked(&image[..total]).is_ok());
        }
    }

    fn mutated(f: impl FnOnce(&mut Ipv4Packet<&mut [u8]>)) -> [u8; 46] {
        let mut buf = [0u8; 46];
        buf.copy_from_slice(ack_ip());
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        f(&mut p);
        // Keep the checksum valid so that only the mutated field is wrong, unless the
        // header now runs past the buffer.
        if p.header_len() <= 46 {
            p.fill_checksum();
        }
        buf
    }

    #[test]
    fn header_field_errors() {
        let check = |buf: &[u8]| Ipv4Packet::new_checked(buf).err();
        assert_eq!(check(&mutated(|p| p.set_version(6))), Some(Error::BadVersion));
        for ihl in 0..5 {
            let buf = mutated(|p| p.set_header_len(ihl * 4));
            assert_eq!(check(&buf), Some(Error::BadHeaderLength));
        }
        // IHL 15 = 60 bytes, more than the 46-byte buffer.
        assert_eq!(check(&mutated(|p| p.set_header_len(60))), Some(Error::Truncated));
        // Total length shorter than the header.
        assert_eq!(check(&mutated(|p| p.set_total_len(19))), Some(Error::BadLength));
        assert_eq!(check(&mutated(|p| p.set_total_len(0))), Some(Error::BadLength));
        // Total length longer than the buffer (46 bytes including the padding).
        assert_eq!(check(&mutated(|p| p.set_total_len(47))), Some(Error::Truncated));
        assert!(check(&mutated(|p| p.set_total_len(46))).is_none());
        // The same errors from parse on an unchecked view.
        let buf = mutated(|p| p.set_version(6));
        let p = Ipv4Packet::new_unchecked(&buf[..]);
        assert_eq!(Ipv4Repr::parse(&p, false), Err(Error::BadVersion));
    }

    #[test]
    fn bad_checksum() {
        let mut buf = [0u8; 40];
        buf.copy_from_slice(&ack_ip()[..40]);
        buf[8] = 63; // TTL changed without updating the checksum
        let packet = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(!packet.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&packet, true), Err(Error::BadChecksum));
        // Offload: the device vouched for it, so no check.
        assert_eq!(Ipv4Repr::parse(&packet, false).unwrap().ttl, 63);
        // A checksum that is wrong only in the option area is caught too.
        let mut opts = with_options_packet();
        opts[23] = 1;
        let packet = Ipv4Packet::new_checked(&opts[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&packet, true), Err(Error::BadChecksum));
    }

    #[test]
    fn fragments_are_flagged() {
        let first = mutated(|p| p.set_more_frags(true));
        let p = Ipv4Packet::new_checked(&first[..]).unwrap();
        assert!(p.is_fragment());
        let repr = Ipv4Repr::parse(&p, true).unwrap();
        assert_eq!(repr.fragment, Some(Fragment { more: true, offset: 0 }));
        let last = mutated(|p| p.set_frag_offset(2960));
        let p = Ipv4Packet::new_checked(&last[..]).unwrap();
        assert!(p.is_fragment() && !p.more_frags());
        let repr = Ipv4Repr::parse(&p, true).unwrap();
        assert_eq!(repr.fragment, Some(Fragment { more: false, offset: 2960 }));
    }

    #[test]
    fn setters_read_back() {
        let mut buf = [0u8; 32];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_dscp(46);
        p.set_ecn(3);
        p.set_total_len(30);
        p.set_ident(0xbeef);
        p.set_dont_frag(true);
        p.set_more_frags(true);
        p.set_frag_offset(8 * 0x1fff);
        p.set_ttl(255);
        p.set_protocol(IpProtocol::UDP);
        p.set_src_addr(Ipv4Addr::new(1, 2, 3, 4));
        p.set_dst_addr(Ipv4Addr::new(5, 6, 7, 8));
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        p.payload_mut().copy_from_slice(&[9; 6]);
        p.fill_checksum();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 24);
        assert_eq!((p.dscp(), p.ecn()), (46, 3));
        assert_eq!(p.total_len(), 30);
        assert_eq!(p.ident(), 0xbeef);
        assert!(p.dont_frag() && p.more_frags());
        assert_eq!(p.frag_offset(), 65528);
        p.set_dont_frag(false);
        p.set_more_frags(false);
        assert!(!p.dont_frag() && !p.more_frags());
        assert_eq!(p.frag_offset(), 65528); // flags and offset share a word
        assert_eq!(p.ttl(), 255);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.src_addr(), Ipv4Addr::new(1, 2, 3, 4));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(5, 6, 7, 8));
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[9; 6]);
        assert!(!p.verify_checksum()); // the flags changed after fill
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(IpProtocol(99).to_string(), "protocol 99");
    }

    #[test]
    fn new_is_an_unfragmented_df_datagram_with_ttl_64() {
        let r = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), IpProtocol::TCP, 20);
        let mut buf = [0u8; 40];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), true);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.ttl(), p.ident(), p.dont_frag(), p.more_frags(), p.frag_offset()), (64, 0, true, false, 0));
        assert_eq!((p.dscp(), p.ecn(), p.total_len(), p.protocol()), (0, 0, 40, IpProtocol::TCP));
        assert_eq!(Ipv4Repr::parse(&p, true), Ok(r));
    }
}
