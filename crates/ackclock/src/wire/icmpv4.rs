//! ICMP for IPv4 (RFC 792): echo, and destination unreachable with the RFC 1191
//! next-hop MTU.
//!
//! The view's buffer is the whole ICMP message, i.e. the IPv4 payload (already trimmed
//! by the IPv4 total length), because the checksum covers all of it.

use core::fmt;

use super::checksum;
use super::{Error, Result};

/// Length of the fixed ICMP header: type, code, checksum and the 4-byte rest-of-header.
pub const HEADER_LEN: usize = 8;

mod field {
    use core::ops::Range;

    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// Echo (RFC 792 "Echo or Echo Reply Message").
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    /// Destination unreachable: bytes 4..6 unused (zero), 6..8 the next-hop MTU for
    /// code 4 (RFC 1191 §4).
    pub const MTU: Range<usize> = 6..8;
}

/// An ICMP message type. A newtype so that unknown types round-trip through the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Icmpv4Message(pub u8);

impl Icmpv4Message {
    /// Echo reply (RFC 792).
    pub const ECHO_REPLY: Icmpv4Message = Icmpv4Message(0);
    /// Destination unreachable (RFC 792).
    pub const DST_UNREACHABLE: Icmpv4Message = Icmpv4Message(3);
    /// Echo request (RFC 792).
    pub const ECHO_REQUEST: Icmpv4Message = Icmpv4Message(8);
    /// Time exceeded (RFC 792).
    pub const TIME_EXCEEDED: Icmpv4Message = Icmpv4Message(11);
}

impl fmt::Display for Icmpv4Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Icmpv4Message::ECHO_REPLY => f.write_str("echo reply"),
            Icmpv4Message::DST_UNREACHABLE => f.write_str("destination unreachable"),
            Icmpv4Message::ECHO_REQUEST => f.write_str("echo request"),
            Icmpv4Message::TIME_EXCEEDED => f.write_str("time exceeded"),
            Icmpv4Message(t) => write!(f, "type {t}"),
        }
    }
}

/// The code of a destination unreachable message: why (RFC 792; 5..=15 from RFC 1122
/// §3.2.2.1 and RFC 1812 §5.2.7.1). A newtype so that every code round-trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DstUnreachable(pub u8);

impl DstUnreachable {
    /// Net unreachable.
    pub const NET: DstUnreachable = DstUnreachable(0);
    /// Host unreachable.
    pub const HOST: DstUnreachable = DstUnreachable(1);
    /// Protocol unreachable.
    pub const PROTOCOL: DstUnreachable = DstUnreachable(2);
    /// Port unreachable.
    pub const PORT: DstUnreachable = DstUnreachable(3);
    /// Fragmentation needed and DF set; carries the next-hop MTU (RFC 1191 §4).
    pub const FRAG_NEEDED: DstUnreachable = DstUnreachable(4);
    /// Source route failed.
    pub const SOURCE_ROUTE_FAILED: DstUnreachable = DstUnreachable(5);
    /// Destination network unknown (RFC 1122).
    pub const NET_UNKNOWN: DstUnreachable = DstUnreachable(6);
    /// Destination host unknown (RFC 1122).
    pub const HOST_UNKNOWN: DstUnreachable = DstUnreachable(7);
    /// Communication administratively prohibited (RFC 1812).
    pub const ADMIN_PROHIBITED: DstUnreachable = DstUnreachable(13);
}

/// A read/write view of an ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

view_buffer!(Icmpv4Packet);

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wrap `buffer` without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }

    /// Wrap `buffer` and check that it holds the 8-byte header, so that no accessor can
    /// panic.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] if the buffer is shorter than [`HEADER_LEN`].
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message(self.buffer.as_ref()[field::TYPE])
    }

    /// Message code.
    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM)
    }

    /// Echo identifier (bytes 4..6; meaningful for echo messages).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        self.read_u16(field::ECHO_IDENT)
    }

    /// Echo sequence number (bytes 6..8; meaningful for echo messages).
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        self.read_u16(field::ECHO_SEQNO)
    }

    /// Next-hop MTU (bytes 6..8; meaningful for destination unreachable code 4,
    /// RFC 1191 §4; zero from routers that predate it).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        self.read_u16(field::MTU)
    }

    /// Everything after the 8-byte header: echo data, or the original datagram's header
    /// and leading data in an error message.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Whether the checksum verifies: the ones' complement sum of the whole message,
    /// checksum included, is all ones (RFC 792).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Set the message type.
    #[inline]
    pub fn set_msg_type(&mut self, value: Icmpv4Message) {
        self.buffer.as_mut()[field::TYPE] = value.0;
    }

    /// Set the message code.
    #[inline]
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        self.write_u16(field::CHECKSUM, value);
    }

    /// Set the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, value: u16) {
        self.write_u16(field::ECHO_IDENT, value);
    }

    /// Set the echo sequence number.
    #[inline]
    pub fn set_echo_seq_no(&mut self, value: u16) {
        self.write_u16(field::ECHO_SEQNO, value);
    }

    /// Set the next-hop MTU (bytes 6..8).
    #[inline]
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        self.write_u16(field::MTU, value);
    }

    /// The data after the header, mutably.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Same as [`data_mut`](Self::data_mut), by the name the other views use.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.data_mut()
    }

    /// Compute and store the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::sum(self.buffer.as_ref());
        self.set_checksum(checksum::finish(sum));
    }
}

/// The high-level content of the ICMP messages this stack handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr<'a> {
    /// Echo request (type 8, code 0).
    EchoRequest {
        /// Identifier, to match replies to requests.
        ident: u16,
        /// Sequence number, to match replies to requests.
        seq_no: u16,
        /// The data after the header, which the reply echoes.
        data: &'a [u8],
    },
    /// Echo reply (type 0, code 0).
    EchoReply {
        /// Identifier of the request answered.
        ident: u16,
        /// Sequence number of the request answered.
        seq_no: u16,
        /// The request's data, echoed.
        data: &'a [u8],
    },
    /// Destination unreachable (type 3).
    DstUnreachable {
        /// Why the datagram could not be delivered: the message's code.
        reason: DstUnreachable,
        /// The next-hop MTU for [`DstUnreachable::FRAG_NEEDED`] (RFC 1191 §4); zero for
        /// every other reason (parse reads it only for code 4, emit writes it only then).
        next_hop_mtu: u16,
        /// The original datagram's IPv4 header and its first 8 data bytes (RFC 792), which
        /// carry the transport ports to find the socket. Anything the sender quoted beyond
        /// that is not included.
        header: &'a [u8],
    },
    /// Time exceeded (type 11): code 0, the TTL ran out in transit; 1, reassembly timed out.
    TimeExceeded {
        /// The message's code.
        code: u8,
        /// The original datagram's IPv4 header and its first 8 data bytes, as for
        /// [`DstUnreachable`](Icmpv4Repr::DstUnreachable).
        header: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Read `packet`. [`Error::Truncated`] if shorter than 8 bytes;
    /// [`Error::BadChecksum`] if the checksum does not verify; [`Error::Unsupported`] for
    /// other types, and for echo messages with a non-zero code (RFC 792 defines only 0).
    ///
    /// For destination unreachable and time exceeded, the quoted datagram must begin with an IPv4 header
    /// (version 4, else [`Error::BadVersion`]; IHL ≥ 5, else [`Error::BadHeaderLength`])
    /// followed by at least 8 data bytes (else [`Error::Truncated`]): without them the
    /// message cannot be matched to a connection.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Icmpv4Packet<&'a T>) -> Result<Self> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let data: &'a [u8] = &packet.buffer.as_ref()[HEADER_LEN..];
        match (packet.msg_type(), packet.msg_code()) {
            (Icmpv4Message::ECHO_REQUEST, 0) => {
                Ok(Icmpv4Repr::EchoRequest { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data })
            }
            (Icmpv4Message::ECHO_REPLY, 0) => {
                Ok(Icmpv4Repr::EchoReply { ident: packet.echo_ident(), seq_no: packet.echo_seq_no(), data })
            }
            (Icmpv4Message::DST_UNREACHABLE, code) => {
                let reason = DstUnreachable(code);
                let next_hop_mtu = if reason == DstUnreachable::FRAG_NEEDED { packet.next_hop_mtu() } else { 0 };
                Ok(Icmpv4Repr::DstUnreachable { reason, next_hop_mtu, header: quoted(data)? })
            }
            (Icmpv4Message::TIME_EXCEEDED, code) => Ok(Icmpv4Repr::TimeExceeded { code, header: quoted(data)? }),
            _ => Err(Error::Unsupported),
        }
    }

    /// Message length [`emit`](Self::emit) writes: header plus data.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => HEADER_LEN + data.len(),
            Icmpv4Repr::DstUnreachable { header, .. } | Icmpv4Repr::TimeExceeded { header, .. } => {
                HEADER_LEN + header.len()
            }
        }
    }

    /// Write the whole message, data included, and fill the checksum. Unlike the other
    /// formats, emit copies the data: it is part of the repr and the checksum covers it.
    /// The copy and the checksum are one pass ([`checksum::copy_and_sum`]).
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len) (a caller bug).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) {
        let (msg_type, code, word1, word2, data) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, data } => (Icmpv4Message::ECHO_REQUEST, 0, ident, seq_no, data),
            Icmpv4Repr::EchoReply { ident, seq_no, data } => (Icmpv4Message::ECHO_REPLY, 0, ident, seq_no, data),
            Icmpv4Repr::DstUnreachable { reason, next_hop_mtu, header } => {
                let mtu = if reason == DstUnreachable::FRAG_NEEDED { next_hop_mtu } else { 0 };
                (Icmpv4Message::DST_UNREACHABLE, reason.0, 0, mtu, header)
            }
            Icmpv4Repr::TimeExceeded { code, header } => (Icmpv4Message::TIME_EXCEEDED, code, 0, 0, header),
        };
        packet.set_msg_type(msg_type);
        packet.set_msg_code(code);
        packet.set_checksum(0);
        // Bytes 4..6 and 6..8: echo ident and seq, or unused and next-hop MTU.
        packet.write_u16(field::ECHO_IDENT, word1);
        packet.write_u16(field::ECHO_SEQNO, word2);
        let buf = packet.buffer.as_mut();
        let data_sum = checksum::copy_and_sum(&mut buf[HEADER_LEN..], data);
        // The data starts at an even offset (8), so its sum adds without a byte swap.
        let sum = checksum::add(checksum::sum(&buf[..HEADER_LEN]), data_sum);
        packet.set_checksum(checksum::finish(sum));
    }
}

/// The quoted IPv4 header plus 8 data bytes at the front of an error message's data.
fn quoted(data: &[u8]) -> Result<&[u8]> {
    let first = *data.first().ok_or(Error::Truncated)?;
    if data.len() < super::ipv4::HEADER_LEN {
        return Err(Error::Truncated);
    }
    if first >> 4 != 4 {
        return Err(Error::BadVersion);
    }
    let header_len = (first & 0x0f) as usize * 4;
    if header_len < super::ipv4::HEADER_LEN {
        return Err(Error::BadHeaderLength);
    }
    data.get(..header_len + 8).ok_or(Error::Truncated)
}

#[cfg(test)]
mod tests {
    use super::super::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
    use super::super::Ipv4Addr;
    use super::*;

    /// An echo request as Linux iputils `ping 192.168.1.1` sends it from 192.168.1.20:
    /// 56 data bytes (the default -s 56), DF set (PMTU discovery is on by default), TTL 64.
    /// The data is ping's layout: a 16-byte `struct timeval` (little-endian, x86-64) then
    /// the fill bytes 0x10, 0x11, ... 0x37. Ident 0x1c2b, sequence 1. Both checksums are
    /// real.
    #[rustfmt::skip]
    static PING: [u8; 84] = [
        // IPv4: ver 4 IHL 5, tos 0, total 84, ident 0x6b3f, DF, TTL 64, ICMP, csum 0x4c04
        0x45, 0x00, 0x00, 0x54, 0x6b, 0x3f, 0x40, 0x00, 0x40, 0x01, 0x4c, 0x04,
        // src 192.168.1.20, dst 192.168.1.1
        0xc0, 0xa8, 0x01, 0x14, 0xc0, 0xa8, 0x01, 0x01,
        // ICMP: type 8, code 0, checksum 0x86c8, ident 0x1c2b, seq 1
        0x08, 0x00, 0x86, 0xc8, 0x1c, 0x2b, 0x00, 0x01,
        // timeval: tv_sec 1700000000, tv_usec 123456
        0x00, 0xf1, 0x53, 0x65, 0x00, 0x00, 0x00, 0x00, 0x40, 0xe2, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, //
        // pattern 0x10..=0x37
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
        0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b,
        0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37,
    ];

    fn ping_icmp() -> &'static [u8] {
        &PING[20..]
    }

    #[test]
    fn parse_linux_ping() {
        let ip = Ipv4Packet::new_checked(&PING[..]).unwrap();
        assert!(ip.verify_checksum());
        let ip_repr = Ipv4Repr::parse(&ip, true).unwrap();
        assert_eq!(ip_repr.protocol, IpProtocol::ICMP);
        assert_eq!(ip_repr.payload_len, 64);
        assert!(ip_repr.dont_frag);
        assert_eq!(ip_repr.ttl, 64);
        assert_eq!(ip_repr.src_addr, Ipv4Addr::new(192, 168, 1, 20));

        let packet = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(packet.verify_checksum());
        assert_eq!(packet.msg_type(), Icmpv4Message::ECHO_REQUEST);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0x86c8);
        assert_eq!(packet.echo_ident(), 0x1c2b);
        assert_eq!(packet.echo_seq_no(), 1);
        assert_eq!(packet.data().len(), 56);
        match Icmpv4Repr::parse(&packet).unwrap() {
            Icmpv4Repr::EchoRequest { ident: 0x1c2b, seq_no: 1, data } => {
                assert_eq!(data, &PING[28..]);
                assert_eq!(data[16..], core::array::from_fn::<u8, 40, _>(|i| 0x10 + i as u8));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn echo_reply_answers_ping() {
        // What the stack does with the request: the same ident, seq and data in a reply.
        let packet = Icmpv4Packet::new_checked(ping_icmp()).unwrap();
        let Icmpv4Repr::EchoRequest { ident, seq_no, data } = Icmpv4Repr::parse(&packet).unwrap() else {
            panic!("not an echo request")
        };
        let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
        let mut buf = [0u8; 64];
        assert_eq!(reply.buffer_len(), 64);
        reply.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        let out = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert!(out.verify_checksum());
        assert_eq!(out.msg_type(), Icmpv4Message::ECHO_REPLY);
        // Type 8 -> 0 changes the first word by 0x0800, so the checksum rises by 0x0800.
        assert_eq!(out.checksum(), 0x86c8 + 0x0800);
        assert_eq!(Icmpv4Repr::parse(&out).unwrap(), reply);
        // Re-emitting the request reproduces ping's bytes exactly.
        let request = Icmpv4Repr::EchoRequest { ident, seq_no, data };
        request.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf[..], *ping_icmp());
    }

    /// A port unreachable quoting a UDP datagram's IPv4 header (20 bytes) and UDP header.
    fn port_unreachable_quote() -> [u8; 28] {
        let mut quote = [0u8; 28];
        quote[..20].copy_from_slice(&PING[..20]);
        quote[9] = 17;
        quote[20..].copy_from_slice(&[0xa0, 0x86, 0x00, 0x35, 0x00, 0x25, 0x4d, 0x05]);
        quote
    }

    /// RFC 792 type 11: the quote as a destination unreachable's; bytes 4..8 unused (zero).
    #[test]
    fn round_trip_time_exceeded() {
        let quote = port_unreachable_quote();
        for code in [0, 1] {
            let repr = Icmpv4Repr::TimeExceeded { code, header: &quote };
            let mut buf = [0xffu8; 36];
            assert_eq!(repr.buffer_len(), 36);
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
            assert_eq!(&buf[..2], &[11, code]);
            assert_eq!(&buf[4..8], &[0, 0, 0, 0]);
            let packet = Icmpv4Packet::new_checked(&buf[..]).unwrap();
            assert!(packet.verify_checksum());
            assert_eq!(Icmpv4Repr::parse(&packet).unwrap(), repr);
        }
    }

    #[test]
    fn round_trip_dst_unreachable() {
        let quote = port_unreachable_quote();
        let cases = [
            (DstUnreachable::PORT, 0),
            (DstUnreachable::FRAG_NEEDED, 1400),
            (DstUnreachable::FRAG_NEEDED, 0), // a pre-RFC 1191 router
            (DstUnreachable::ADMIN_PROHIBITED, 0),
            (DstUnreachable(200), 0),
        ];
        for (reason, next_hop_mtu) in cases {
            let repr = Icmpv4Repr::DstUnreachable { reason, next_hop_mtu, header: &quote };
            let mut buf = [0u8; 36];
            assert_eq!(repr.buffer_len(), 36);
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
            let packet = Icmpv4Packet::new_checked(&buf[..]).unwrap();
            assert!(packet.verify_checksum());
            assert_eq!(packet.msg_code(), reason.0);
            assert_eq!(packet.next_hop_mtu(), next_hop_mtu);
            assert_eq!(Icmpv4Repr::parse(&packet).unwrap(), repr);
        }
        // An MTU given with another reason is not sent: bytes 4..8 are unused there.
        let repr = Icmpv4Repr::DstUnreachable { reason: DstUnreachable::HOST, next_hop_mtu: 1280, header: &quote };
        let mut buf = [0u8; 36];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf[4..8], [0, 0, 0, 0]);
    }

    #[test]
    fn dst_unreachable_quote_is_trimmed_and_checked() {
        // A Linux-style error quotes as much as fits; the repr keeps header + 8 bytes.
        let mut long = [0u8; 8 + 40];
        long[8..36].copy_from_slice(&port_unreachable_quote());
        long[36..].fill(0xee);
        long[0] = 3;
        long[1] = 3;
        let mut p = Icmpv4Packet::new_unchecked(&mut long[..]);
        p.fill_checksum();
        let packet = Icmpv4Packet::new_checked(&long[..]).unwrap();
        match Icmpv4Repr::parse(&packet).unwrap() {
            Icmpv4Repr::DstUnreachable { header, .. } => assert_eq!(header.len(), 28),
            other => panic!("{other:?}"),
        }

        let with_quote = |quote: &[u8]| {
            let mut buf = [0u8; 64];
            buf[0] = 3;
            buf[8..8 + quote.len()].copy_from_slice(quote);
            let mut p = Icmpv4Packet::new_unchecked(&mut buf[..8 + quote.len()]);
            p.fill_checksum();
            let p = Icmpv4Packet::new_unchecked(&buf[..8 + quote.len()]);
            Icmpv4Repr::parse(&p).map(|r| r.buffer_len())
        };
        let quote = port_unreachable_quote();
        assert_eq!(with_quote(&quote), Ok(36));
        for len in 0..quote.len() {
            assert_eq!(with_quote(&quote[..len]), Err(Error::Truncated), "len {len}");
        }
        let mut v6 = quote;
        v6[0] = 0x65;
        assert_eq!(with_quote(&v6), Err(Error::BadVersion));
        let mut ihl4 = quote;
        ihl4[0] = 0x44;
        assert_eq!(with_quote(&ihl4), Err(Error::BadHeaderLength));
        let mut ihl6 = quote;
        ihl6[0] = 0x46; // needs 24 + 8 bytes, has 28
        assert_eq!(with_quote(&ihl6), Err(Error::Truncated));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..HEADER_LEN {
            let prefix = &ping_icmp()[..len];
            assert_eq!(Icmpv4Packet::new_checked(prefix).err(), Some(Error::Truncated));
            let unchecked = Icmpv4Packet::new_unchecked(prefix);
            assert_eq!(Icmpv4Repr::parse(&unchecked).err(), Some(Error::Truncated));
        }
        // Past the header, a cut message fails its checksum (the length is IPv4's).
        for len in HEADER_LEN..ping_icmp().len() {
            let packet = Icmpv4Packet::new_checked(&ping_icmp()[..len]).unwrap();
            assert_eq!(Icmpv4Repr::parse(&packet).err(), Some(Error::BadChecksum), "len {len}");
        }
    }

    #[test]
    fn bad_checksum_and_unsupported() {
        let mut buf = [0u8; 64];
        buf.copy_from_slice(ping_icmp());
        buf[63] ^= 1;
        let packet = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert!(!packet.verify_checksum());
        assert_eq!(Icmpv4Repr::parse(&packet), Err(Error::BadChecksum));

        let with_header = |msg_type: u8, code: u8| {
            let mut buf = [0u8; 64];
            buf.copy_from_slice(ping_icmp());
            let mut p = Icmpv4Packet::new_unchecked(&mut buf[..]);
            p.set_msg_type(Icmpv4Message(msg_type));
            p.set_msg_code(code);
            p.fill_checksum();
            Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(&buf[..])).err()
        };
        assert_eq!(with_header(8, 0), None);
        assert_eq!(with_header(8, 1), Some(Error::Unsupported));
        assert_eq!(with_header(0, 9), Some(Error::Unsupported));
        // Time exceeded is parsed: this data (a ping's) quotes no IPv4 header.
        assert_eq!(with_header(11, 0), Some(Error::BadVersion));
        assert_eq!(with_header(13, 0), Some(Error::Unsupported)); // timestamp
        assert_eq!(with_header(255, 0), Some(Error::Unsupported));
    }

    #[test]
    fn setters_read_back() {
        let mut buf = [0u8; 12];
        let mut p = Icmpv4Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(Icmpv4Message::TIME_EXCEEDED);
        p.set_msg_code(1);
        p.set_echo_ident(0x0102);
        p.set_echo_seq_no(0x0304);
        p.data_mut().copy_from_slice(&[5, 6, 7, 8]);
        p.fill_checksum();
        assert_eq!(p.msg_type(), Icmpv4Message::TIME_EXCEEDED);
        assert_eq!(p.msg_code(), 1);
        assert_eq!(p.echo_ident(), 0x0102);
        assert_eq!(p.echo_seq_no(), 0x0304);
        assert_eq!(p.data(), &[5, 6, 7, 8]);
        assert!(p.verify_checksum());
        p.set_next_hop_mtu(576);
        assert_eq!(p.next_hop_mtu(), 576);
        p.payload_mut()[0] = 9;
        assert_eq!(p.data()[0], 9);
        p.set_checksum(0xabcd);
        assert_eq!(p.checksum(), 0xabcd);
        assert_eq!(Icmpv4Message::TIME_EXCEEDED.to_string(), "time exceeded");
    }
}
