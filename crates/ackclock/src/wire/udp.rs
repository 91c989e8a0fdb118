//! UDP (RFC 768) over IPv4.
//!
//! The view's buffer is the IPv4 payload. The UDP length field bounds the datagram: bytes
//! after it are ignored (RFC 768 "Length").

use super::checksum;
use super::ipv4::IpProtocol;
use super::{Error, Ipv4Addr, Result};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

mod field {
    use core::ops::Range;

    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_buffer!(UdpPacket);

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap `buffer` without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wrap `buffer` and validate the length field (see [`check_len`](Self::check_len)),
    /// so that no accessor can panic.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Fewer than 8 bytes is [`Error::Truncated`]; a length field below 8 (RFC 768: it
    /// counts the header) is [`Error::BadLength`]; a length field past the buffer is
    /// [`Error::Truncated`].
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let buffer_len = self.buffer.as_ref().len();
        if buffer_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = self.len() as usize;
        if len < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len > buffer_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port (0 if unused, RFC 768).
    #[inline]
    pub fn src_port(&self) -> u16 {
        self.read_u16(field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.read_u16(field::DST_PORT)
    }

    /// Length field: header plus data, in bytes.
    #[inline]
    #[allow(clippy::len_without_is_empty)] // a wire field, not a container length
    pub fn len(&self) -> u16 {
        self.read_u16(field::LENGTH)
    }

    /// Checksum field (0: none was computed).
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM)
    }

    /// The data: bytes 8 up to the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.len() as usize]
    }

    /// Ones'-complement sum of the 8 header bytes, not complemented.
    #[inline]
    pub fn header_sum(&self) -> u16 {
        checksum::sum(&self.buffer.as_ref()[..HEADER_LEN])
    }

    /// Whether the checksum verifies over the pseudo-header and the datagram up to the
    /// length field (RFC 768). A zero checksum field means the sender computed none and
    /// is accepted (RFC 768; RFC 1122 §4.1.3.4 lets a host accept it).
    #[inline]
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::UDP.0, len);
        let data = checksum::sum(&self.buffer.as_ref()[..len as usize]);
        checksum::add(ph, data) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        self.write_u16(field::SRC_PORT, value);
    }

    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        self.write_u16(field::DST_PORT, value);
    }

    /// Set the length field.
    #[inline]
    pub fn set_len(&mut self, value: u16) {
        self.write_u16(field::LENGTH, value);
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        self.write_u16(field::CHECKSUM, value);
    }

    /// The data up to the length field, mutably.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Compute and store the checksum over the pseudo-header, header and data (up to the
    /// length field, which must be set). A computed 0 is sent as 0xffff, since 0 means
    /// "no checksum" (RFC 768).
    #[inline]
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let end = self.len() as usize;
        let payload_sum = checksum::sum(&self.buffer.as_ref()[HEADER_LEN..end]);
        self.fill_checksum_with_payload_sum(src, dst, payload_sum);
    }

    /// [`fill_checksum`](Self::fill_checksum) without reading the data: `payload_sum` is
    /// its sum, e.g. from [`checksum::copy_and_sum`] when the data was copied in.
    #[inline]
    pub fn fill_checksum_with_payload_sum(&mut self, src: Ipv4Addr, dst: Ipv4Addr, payload_sum: u16) {
        self.set_checksum(0);
        let ph = checksum::pseudo_header(src, dst, IpProtocol::UDP.0, self.len());
        // The data starts at offset 8, even, so its sum adds without a byte swap.
        let sum = checksum::add_at(checksum::add(ph, self.header_sum()), payload_sum, HEADER_LEN);
        let field = match checksum::finish(sum) {
            0 => 0xffff,
            c => c,
        };
        self.set_checksum(field);
    }
}

/// The high-level content of a UDP header. The length is the payload's, passed to
/// [`emit`](Self::emit); the payload is the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Read `packet`, re-checking its length (so an unchecked view cannot make this
    /// panic) and, when `verify_checksum` is true, its checksum against the pseudo-header
    /// of `src` and `dst` ([`Error::BadChecksum`]; a zero field is accepted as "none").
    /// Pass `false` when the device verified it (receive checksum offload).
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &UdpPacket<&T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        verify_checksum: bool,
    ) -> Result<UdpRepr> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        Ok(UdpRepr { src_port: packet.src_port(), dst_port: packet.dst_port() })
    }

    /// Length of the header [`emit`](Self::emit) writes.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Datagram length for `payload_len` bytes of data.
    #[inline]
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Write the header for `payload_len` bytes of data. With `fill_checksum`, the
    /// checksum covers the data already in the buffer, so write the data first (or emit
    /// with `false`, write the data, then call [`UdpPacket::fill_checksum`]). Without it
    /// the field is 0, "no checksum" (RFC 768), for a device with transmit offload to fill.
    ///
    /// `payload_len` must be at most 65527 (the length field is 16 bits); larger values
    /// are a caller bug (debug assertion; truncated in release).
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes, or than `8 + payload_len` when filling the
    /// checksum (a caller bug).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        payload_len: usize,
        fill_checksum: bool,
    ) {
        debug_assert!(payload_len <= u16::MAX as usize - HEADER_LEN);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((HEADER_LEN + payload_len) as u16);
        if fill_checksum {
            packet.fill_checksum(src, dst);
        } else {
            packet.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ipv4::{Ipv4Packet, Ipv4Repr};
    use super::*;

    const CLIENT: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 20);
    const SERVER: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);

    /// A DNS query for the A record of example.com from 192.168.1.20:41094 to the
    /// resolver at 192.168.1.1:53, laid out as a stub resolver (dig, without EDNS) sends
    /// it: ID 0xbeef, flags 0x0120 (RD, AD), one question. 29 bytes of DNS make the
    /// datagram odd-length (37), exercising the checksum's padding byte. Both checksums
    /// are real.
    #[rustfmt::skip]
    static DNS_QUERY: [u8; 57] = [
        // IPv4: ver 4 IHL 5, tos 0, total 57, ident 0x2f1a, no flags, TTL 64, UDP, csum
        0x45, 0x00, 0x00, 0x39, 0x2f, 0x1a, 0x00, 0x00, 0x40, 0x11, 0xc8, 0x34,
        // src 192.168.1.20, dst 192.168.1.1
        0xc0, 0xa8, 0x01, 0x14, 0xc0, 0xa8, 0x01, 0x01,
        // UDP: 41094 -> 53, length 37, checksum 0x4d05
        0xa0, 0x86, 0x00, 0x35, 0x00, 0x25, 0x4d, 0x05,
        // DNS header: ID, flags, QDCOUNT 1, AN/NS/ARCOUNT 0
        0xbe, 0xef, 0x01, 0x20, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        // QNAME 7 "example" 3 "com" 0, QTYPE A, QCLASS IN
        0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, //
        0x00, 0x01, 0x00, 0x01,
    ];

    fn dns_udp() -> &'static [u8] {
        &DNS_QUERY[20..]
    }

    #[test]
    fn parse_dns_query() {
        let ip = Ipv4Packet::new_checked(&DNS_QUERY[..]).unwrap();
        let ip_repr = Ipv4Repr::parse(&ip, true).unwrap();
        assert_eq!(ip_repr.protocol, IpProtocol::UDP);
        let packet = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(packet.src_port(), 41094);
        assert_eq!(packet.dst_port(), 53);
        assert_eq!(packet.len(), 37);
        assert_eq!(packet.checksum(), 0x4d05);
        assert_eq!(packet.payload(), &DNS_QUERY[28..]);
        assert!(packet.verify_checksum(ip_repr.src_addr, ip_repr.dst_addr));
        // The pseudo-header is part of the sum: another address does not verify.
        assert!(!packet.verify_checksum(CLIENT, Ipv4Addr::new(192, 168, 1, 2)));
        let repr = UdpRepr::parse(&packet, CLIENT, SERVER, true).unwrap();
        assert_eq!(repr, UdpRepr { src_port: 41094, dst_port: 53 });
    }

    #[test]
    fn emit_reproduces_dns_query() {
        let repr = UdpRepr { src_port: 41094, dst_port: 53 };
        let payload = &DNS_QUERY[28..];
        let mut buf = [0u8; 37];
        assert_eq!(repr.buffer_len(payload.len()), 37);
        buf[8..].copy_from_slice(payload);
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), CLIENT, SERVER, payload.len(), true);
        assert_eq!(buf[..], *dns_udp());
        // The same via emit without checksum, then the copy-and-sum path.
        let mut buf2 = [0u8; 37];
        let mut p = UdpPacket::new_unchecked(&mut buf2[..]);
        repr.emit(&mut p, CLIENT, SERVER, payload.len(), false);
        assert_eq!(p.checksum(), 0);
        let payload_sum = checksum::copy_and_sum(p.payload_mut(), payload);
        p.fill_checksum_with_payload_sum(CLIENT, SERVER, payload_sum);
        assert_eq!(buf2, buf);
    }

    #[test]
    fn round_trip() {
        for (src_port, dst_port, payload_len) in [(0, 7, 0), (68, 67, 300), (65535, 1, 1)] {
            let repr = UdpRepr { src_port, dst_port };
            let mut buf = [0x77u8; 308];
            let len = repr.buffer_len(payload_len);
            for fill in [true, false] {
                let mut p = UdpPacket::new_unchecked(&mut buf[..len]);
                repr.emit(&mut p, CLIENT, SERVER, payload_len, fill);
                let p = UdpPacket::new_checked(&buf[..len]).unwrap();
                assert_eq!(p.payload().len(), payload_len);
                assert_eq!(p.checksum() == 0, !fill);
                assert_eq!(UdpRepr::parse(&p, CLIENT, SERVER, true).unwrap(), repr);
            }
        }
    }

    #[test]
    fn zero_checksum_is_sent_as_ffff() {
        // Choose the payload word so that the datagram sums to 0xffff: the computed
        // checksum is then 0, which must go out as 0xffff.
        let mut buf = [0u8; 10];
        let repr = UdpRepr { src_port: 1000, dst_port: 2000 };
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), CLIENT, SERVER, 2, false);
        let partial = {
            let p = UdpPacket::new_unchecked(&buf[..]);
            let ph = checksum::pseudo_header(CLIENT, SERVER, 17, 10);
            checksum::add(ph, p.header_sum())
        };
        buf[8..].copy_from_slice(&(!partial).to_be_bytes());
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.fill_checksum(CLIENT, SERVER);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum(CLIENT, SERVER));
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, CLIENT, SERVER, true), Ok(repr));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..dns_udp().len() {
            let prefix = &dns_udp()[..len];
            assert_eq!(UdpPacket::new_checked(prefix).err(), Some(Error::Truncated));
            let unchecked = UdpPacket::new_unchecked(prefix);
            let parsed = UdpRepr::parse(&unchecked, CLIENT, SERVER, true);
            assert_eq!(parsed.err(), Some(Error::Truncated));
        }
        // Trailing bytes past the length field are ignored (the checksum still verifies).
        let mut longer = [0u8; 40];
        longer[..37].copy_from_slice(dns_udp());
        let p = UdpPacket::new_checked(&longer[..]).unwrap();
        assert_eq!(p.payload().len(), 29);
        assert!(UdpRepr::parse(&p, CLIENT, SERVER, true).is_ok());
    }

    #[test]
    fn length_and_checksum_errors() {
        let with_len = |len: u16| {
            let mut buf = [0u8; 37];
            buf.copy_from_slice(dns_udp());
            UdpPacket::new_unchecked(&mut buf[..]).set_len(len);
            UdpPacket::new_checked(&buf[..]).err()
        };
        for len in 0..8 {
            assert_eq!(with_len(len), Some(Error::BadLength));
        }
        assert_eq!(with_len(38), Some(Error::Truncated));
        assert_eq!(with_len(0xffff), Some(Error::Truncated));
        assert_eq!(with_len(8), None);

        let mut buf = [0u8; 37];
        buf.copy_from_slice(dns_udp());
        buf[36] ^= 0x80;
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, CLIENT, SERVER, true), Err(Error::BadChecksum));
        assert!(UdpRepr::parse(&p, CLIENT, SERVER, false).is_ok()); // offloaded
                                                                    // Checksum 0: the sender computed none, so corruption cannot be detected.
        UdpPacket::new_unchecked(&mut buf[..]).set_checksum(0);
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(UdpRepr::parse(&p, CLIENT, SERVER, true).is_ok());
    }

    #[test]
    fn setters_read_back() {
        let mut buf = [0u8; 12];
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(0x1234);
        p.set_dst_port(0x5678);
        p.set_len(11);
        p.set_checksum(0x9abc);
        p.payload_mut().copy_from_slice(&[1, 2, 3]);
        assert_eq!(p.src_port(), 0x1234);
        assert_eq!(p.dst_port(), 0x5678);
        assert_eq!(p.len(), 11);
        assert_eq!(p.checksum(), 0x9abc);
        assert_eq!(p.payload(), &[1, 2, 3]);
        assert_eq!(p.into_inner()[11], 0);
    }
}
