//! TCP header and options: RFC 9293 §3.1 (header format), RFC 7323 (window scale,
//! timestamps), RFC 2018 and RFC 2883 (SACK, D-SACK).
//!
//! [`TcpPacket`] is a zero-copy view for the receive hot path: once `new_checked` has
//! validated the two lengths, every accessor is a fixed-offset load. The fast path
//! (header prediction, Van Jacobson's `pred_flags`) reads raw big-endian words with
//! [`TcpPacket::word`] and [`TcpPacket::timestamps_fast`] instead of parsing options.
//! [`TcpRepr`] is the fully parsed form, and emits options in exactly Linux's layout.

use core::fmt;
use core::ops;

use super::checksum;
use super::{Error, Ipv4Addr, Result};

mod options;
pub use options::{SackBlocks, TcpOption, TcpOptions};

/// IP protocol number of TCP, for the pseudo-header (RFC 9293 §3.1).
const PROTOCOL: u8 = 6;

/// Byte ranges of the fixed header fields (RFC 9293 §3.1, Figure 1).
mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset (4 bits), reserved (3 bits), then the 9 flag bits.
    pub const OFF_FLAGS: Range<usize> = 12..14;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of the fixed header; the minimum data offset is 5 words.
pub const HEADER_LEN: usize = 20;
/// Largest header: a data offset of 15 words.
pub const MAX_HEADER_LEN: usize = 60;
/// Most option bytes a header can carry.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;

/// First option word of the "timestamps only" layout, NOP NOP kind 8 length 10: the one
/// layout header prediction accepts (RFC 7323 Appendix A; BSD `TCPOPT_TSTAMP_HDR`, Linux
/// `tcp_fast_parse_options`), with the header then exactly 32 bytes long.
pub const TS_ONLY_PREFIX: u32 = 0x0101_080a;

/// Option kinds (IANA "TCP Option Kind Numbers").
mod opt {
    pub const END_OF_LIST: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
}

/// Largest window shift; RFC 7323 §2.3 caps larger received values to this.
pub const MAX_WINDOW_SCALE: u8 = 14;

// ---------------------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------------------

/// The 12 bits after the data offset: the 8 classic control bits, AE (formerly NS,
/// RFC 3540; now AccECN's AE) and the 3 reserved bits, kept so that a parsed header
/// re-emits unchanged (RFC 9293 §3.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u16);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECN-Echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// AccECN's AE bit, formerly the ECN-nonce NS bit (RFC 3540, historic).
    pub const AE: TcpFlags = TcpFlags(0x100);
    /// Alias of [`TcpFlags::AE`].
    pub const NS: TcpFlags = TcpFlags::AE;
    /// No flags.
    pub const NONE: TcpFlags = TcpFlags(0);
    /// Every bit of the 12-bit field.
    const MASK: u16 = 0x0fff;

    /// From raw bits; bits above the 12-bit field are dropped.
    #[inline]
    pub const fn from_bits(bits: u16) -> TcpFlags {
        TcpFlags(bits & Self::MASK)
    }

    /// The raw 12 bits.
    #[inline]
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Whether every bit of `other` is set.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set.
    #[inline]
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether no bit is set.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl ops::BitOrAssign for TcpFlags {
    #[inline]
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl ops::BitAndAssign for TcpFlags {
    #[inline]
    fn bitand_assign(&mut self, rhs: TcpFlags) {
        self.0 &= rhs.0;
    }
}

impl ops::Not for TcpFlags {
    type Output = TcpFlags;
    /// Complement within the 12-bit field.
    #[inline]
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0 & Self::MASK)
    }
}

impl fmt::Display for TcpFlags {
    /// tcpdump's notation: `S.` is SYN-ACK, `P.` PSH-ACK, `.` a pure ACK, `none` no flag.
    /// Reserved bits are not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tcpdump's order and letters (print-tcp.c `tcp_flag_values`).
        const NAMES: [(TcpFlags, char); 9] = [
            (TcpFlags::FIN, 'F'),
            (TcpFlags::SYN, 'S'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::ACK, '.'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::AE, 'e'),
        ];
        if !self.intersects(TcpFlags(0x1ff)) {
            return f.write_str("none");
        }
        for (flag, c) in NAMES {
            if self.contains(flag) {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

// ---------------------------------------------------------------------------------------
// Packet view
// ---------------------------------------------------------------------------------------

/// Zero-copy view of a TCP segment (header, options, payload): the buffer is exactly the
/// IPv4 payload.
///
/// Accessors index the buffer directly; they cannot panic on a view from
/// [`new_checked`](Self::new_checked), but may on one from
/// [`new_unchecked`](Self::new_unchecked) over a short buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

view_buffer!(TcpPacket);

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap a buffer without validating it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> TcpPacket<T> {
        TcpPacket { buffer }
    }

    /// Wrap a buffer, checking that the fixed header and the header length it declares
    /// fit. Options are not validated here (see [`TcpOptions`], [`TcpRepr::parse`]).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// The checks of [`new_checked`](Self::new_checked): `Truncated` if shorter than 20
    /// bytes or than the data offset says, `BadHeaderLength` if the data offset is < 5.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            Err(Error::BadHeaderLength)
        } else if header_len > len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn read_u32(&self, at: usize) -> u32 {
        let d = &self.buffer.as_ref()[at..at + 4];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        self.read_u16(field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.read_u16(field::DST_PORT)
    }

    /// Sequence number (SEG.SEQ).
    #[inline]
    pub fn seq_number(&self) -> u32 {
        self.read_u32(field::SEQ_NUM.start)
    }

    /// Acknowledgment number (SEG.ACK), meaningful only with ACK set.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        self.read_u32(field::ACK_NUM.start)
    }

    /// Header length in bytes: the data offset times 4.
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::OFF_FLAGS.start] >> 4) as usize) * 4
    }

    /// Control bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits(self.read_u16(field::OFF_FLAGS))
    }

    /// Window field as sent, before window scaling (RFC 7323 §2.2).
    #[inline]
    pub fn window_len(&self) -> u16 {
        self.read_u16(field::WIN_SIZE)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM)
    }

    /// Urgent pointer, meaningful only with URG set.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        self.read_u16(field::URGENT)
    }

    /// Big-endian 32-bit word `i` of the header, for the fast path: 0 ports, 1 seq,
    /// 2 ack, 3 data offset/flags/window, 4 checksum/urgent; 5.. the option words.
    ///
    /// # Panics
    /// If word `i` is past the buffer (with a checked view, `i < header_len() / 4` is safe).
    #[inline]
    pub fn word(&self, i: usize) -> u32 {
        self.read_u32(i * 4)
    }

    /// The option bytes, padding included.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// An iterator over the options.
    #[inline]
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// The data after the header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// SEG.LEN (RFC 9293 §3.3.1): payload bytes plus one for SYN and one for FIN, which
    /// occupy sequence space.
    #[inline]
    pub fn segment_len(&self) -> usize {
        let flags = self.flags().bits();
        self.payload().len() + (flags & 1) as usize + ((flags >> 1) & 1) as usize
    }

    /// Timestamps if the options are exactly NOP NOP TS ([`TS_ONLY_PREFIX`], header of 32
    /// bytes): the header-prediction check of RFC 7323 Appendix A, three word loads and
    /// no option parsing. `None` means "take the slow path", not "no timestamps".
    #[inline]
    pub fn timestamps_fast(&self) -> Option<(u32, u32)> {
        if self.header_len() == HEADER_LEN + 12 && self.word(5) == TS_ONLY_PREFIX {
            Some((self.word(6), self.word(7)))
        } else {
            None
        }
    }

    /// Ones'-complement sum of the header bytes (options included), not complemented.
    #[inline]
    pub fn header_sum(&self) -> u16 {
        checksum::sum(&self.buffer.as_ref()[..self.header_len()])
    }

    /// Whether the checksum over the pseudo-header and the whole segment verifies
    /// (RFC 9293 §3.1). A buffer longer than 65535 bytes never verifies.
    #[inline]
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let data = self.buffer.as_ref();
        let Ok(len) = u16::try_from(data.len()) else {
            return false;
        };
        let ph = checksum::pseudo_header(src, dst, PROTOCOL, len);
        checksum::add(ph, checksum::sum(data)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    #[inline]
    fn write_u32(&mut self, at: usize, value: u32) {
        self.buffer.as_mut()[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }

    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        self.write_u16(field::SRC_PORT, value)
    }

    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        self.write_u16(field::DST_PORT, value)
    }

    /// Set the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, value: u32) {
        self.write_u32(field::SEQ_NUM.start, value)
    }

    /// Set the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, value: u32) {
        self.write_u32(field::ACK_NUM.start, value)
    }

    /// Set the header length in bytes, a multiple of 4 in `20..=60` (the flags are kept).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len % 4 == 0 && (HEADER_LEN..=MAX_HEADER_LEN).contains(&len));
        let b = &mut self.buffer.as_mut()[field::OFF_FLAGS.start];
        *b = (*b & 0x0f) | ((((len / 4) & 0xf) as u8) << 4);
    }

    /// Set the control bits (the data offset is kept).
    #[inline]
    pub fn set_flags(&mut self, flags: TcpFlags) {
        let hi = self.read_u16(field::OFF_FLAGS) & 0xf000;
        self.write_u16(field::OFF_FLAGS, hi | flags.bits())
    }

    /// Set the window field (already scaled down by the caller).
    #[inline]
    pub fn set_window_len(&mut self, value: u16) {
        self.write_u16(field::WIN_SIZE, value)
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        self.write_u16(field::CHECKSUM, value)
    }

    /// Set the urgent pointer.
    #[inline]
    pub fn set_urgent_at(&mut self, value: u16) {
        self.write_u16(field::URGENT, value)
    }

    /// The option bytes, as the header length currently says.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The data after the header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Compute and store the checksum over the pseudo-header and the whole segment.
    #[inline]
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let ph = checksum::pseudo_header(src, dst, PROTOCOL, data.len() as u16);
        let sum = checksum::add(ph, checksum::sum(data));
        self.set_checksum(checksum::finish(sum));
    }

    /// [`fill_checksum`](Self::fill_checksum) without reading the payload: `payload_sum` is
    /// the sum of the payload bytes taken while copying them in
    /// ([`checksum::copy_and_sum`]), so the payload is touched exactly once. Only the
    /// header is summed here. The buffer must still end where the payload ends, since its
    /// length is the pseudo-header's length.
    #[inline]
    pub fn fill_checksum_with_payload_sum(&mut self, src: Ipv4Addr, dst: Ipv4Addr, payload_sum: u16) {
        self.set_checksum(0);
        let header_len = self.header_len();
        let len = self.buffer.as_ref().len() as u16;
        let ph = checksum::pseudo_header(src, dst, PROTOCOL, len);
        let sum = checksum::add(ph, self.header_sum());
        // The header length is a multiple of 4, so this never swaps; add_at keeps it honest.
        let sum = checksum::add_at(sum, payload_sum, header_len);
        self.set_checksum(checksum::finish(sum));
    }
}

// ---------------------------------------------------------------------------------------
// Representation
// ---------------------------------------------------------------------------------------

/// A parsed TCP header with its options, and the payload it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// SEG.SEQ.
    pub seq: u32,
    /// SEG.ACK (written and read whatever the ACK flag).
    pub ack: u32,
    /// Control bits.
    pub flags: TcpFlags,
    /// Window field, unscaled.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// MSS option (RFC 9293 §3.7.1).
    pub max_seg_size: Option<u16>,
    /// Window scale shift (RFC 7323 §2), at most 14 when parsed.
    pub window_scale: Option<u8>,
    /// SACK-permitted option (RFC 2018 §2).
    pub sack_permitted: bool,
    /// Timestamps option as (TSval, TSecr) (RFC 7323 §3).
    pub timestamps: Option<(u32, u32)>,
    /// SACK option blocks (RFC 2018 §3); empty when absent.
    pub sack_blocks: SackBlocks,
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> TcpRepr<'a> {
    /// Parse a segment. `BadChecksum` if `verify_checksum` and it does not verify; any
    /// malformed option is `BadOption`. Unknown options are skipped; if an option repeats,
    /// the last one wins. Options are reported whatever the SYN flag: ignoring MSS or
    /// window scale outside a SYN (RFC 7323 §2.2) is the state machine's call.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&'a T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        verify_checksum: bool,
    ) -> Result<TcpRepr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        // Borrow from the underlying `&'a` buffer so options and payload outlive `packet`.
        let data: &'a [u8] = packet.buffer.as_ref();
        let header_len = packet.header_len();
        let mut repr = TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq: packet.seq_number(),
            ack: packet.ack_number(),
            flags: packet.flags(),
            window: packet.window_len(),
            urgent: packet.urgent_at(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            timestamps: None,
            sack_blocks: SackBlocks::new(),
            payload: &data[header_len..],
        };
        for option in TcpOptions::new(&data[HEADER_LEN..header_len]) {
            match option? {
                TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
                TcpOption::MaxSegmentSize(mss) => repr.max_seg_size = Some(mss),
                TcpOption::WindowScale(shift) => repr.window_scale = Some(shift),
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::Sack(blocks) => repr.sack_blocks = blocks,
                TcpOption::Timestamps { tsval, tsecr } => repr.timestamps = Some((tsval, tsecr)),
            }
        }
        Ok(repr)
    }

    /// Option bytes before any SACK option: MSS 4, timestamps 12 (SACK-permitted rides in
    /// their first word) or NOP NOP SACK-permitted 4, NOP WS 4. At most 20.
    #[inline]
    fn base_options_len(&self) -> usize {
        let mut len = 0;
        if self.max_seg_size.is_some() {
            len += 4;
        }
        if self.timestamps.is_some() {
            len += 12;
        } else if self.sack_permitted {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 4;
        }
        len
    }

    /// How many of `sack_blocks` [`emit`](Self::emit) writes: as many as fit in the 40
    /// option bytes after the other options, each taking 8 bytes after a 4-byte NOP NOP
    /// kind length prefix. That is all four without timestamps and three with them, as in
    /// Linux; blocks are dropped from the end, which RFC 2018 §4 allows since the first
    /// block (the most recent, or the D-SACK one of RFC 2883) comes first.
    #[inline]
    pub fn emitted_sack_blocks(&self) -> usize {
        let room = MAX_OPTIONS_LEN - self.base_options_len();
        self.sack_blocks.len().min(room.saturating_sub(4) / 8)
    }

    /// Header length `emit` writes, options included. Every option group is a whole
    /// number of 4-byte words, so no padding is ever needed; the total is at most 60
    /// (see [`emitted_sack_blocks`](Self::emitted_sack_blocks)).
    #[inline]
    pub fn header_len(&self) -> usize {
        let sack = match self.emitted_sack_blocks() {
            0 => 0,
            n => 4 + 8 * n,
        };
        HEADER_LEN + self.base_options_len() + sack
    }

    /// Header plus payload length.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Write the header and options into `packet`, not the payload: callers copy the
    /// payload in themselves (with [`checksum::copy_and_sum`], then
    /// [`TcpPacket::fill_checksum_with_payload_sum`]). With `fill_checksum`, the checksum
    /// covers whatever bytes follow the header in the buffer.
    ///
    /// Options follow Linux's `tcp_options_write` word for word, so segments compare equal
    /// to Linux captures:
    ///
    /// | option | bytes |
    /// |---|---|
    /// | MSS | `02 04 mss` |
    /// | timestamps with SACK-permitted | `04 02 08 0a tsval tsecr` |
    /// | timestamps | `01 01 08 0a tsval tsecr` |
    /// | SACK-permitted alone | `01 01 04 02` |
    /// | window scale | `01 03 03 shift` |
    /// | SACK | `01 01 05 len blocks…` |
    ///
    /// Each is present only when set in the repr, whatever the SYN flag.
    ///
    /// # Panics
    /// If the buffer is shorter than [`header_len`](Self::header_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        fill_checksum: bool,
    ) {
        let header_len = self.header_len();
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq);
        packet.set_ack_number(self.ack);
        packet.write_u16(field::OFF_FLAGS, ((header_len as u16 / 4) << 12) | self.flags.bits());
        packet.set_window_len(self.window);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent);

        let mut w = WordWriter { buf: packet.options_mut(), at: 0 };
        if let Some(mss) = self.max_seg_size {
            w.put(u32::from_be_bytes([opt::MSS, 4, 0, 0]) | mss as u32);
        }
        if let Some((tsval, tsecr)) = self.timestamps {
            let first = if self.sack_permitted {
                // Linux saves a word on SYNs by letting SACK-permitted replace the NOPs.
                u32::from_be_bytes([opt::SACK_PERMITTED, 2, opt::TIMESTAMPS, 10])
            } else {
                TS_ONLY_PREFIX
            };
            w.put(first);
            w.put(tsval);
            w.put(tsecr);
        } else if self.sack_permitted {
            w.put(u32::from_be_bytes([opt::NOP, opt::NOP, opt::SACK_PERMITTED, 2]));
        }
        if let Some(shift) = self.window_scale {
            w.put(u32::from_be_bytes([opt::NOP, opt::WINDOW_SCALE, 3, shift]));
        }
        let n = self.emitted_sack_blocks();
        if n > 0 {
            w.put(u32::from_be_bytes([opt::NOP, opt::NOP, opt::SACK, 2 + 8 * n as u8]));
            for &(left, right) in &self.sack_blocks.as_slice()[..n] {
                w.put(left);
                w.put(right);
            }
        }
        debug_assert_eq!(w.at, header_len - HEADER_LEN);

        if fill_checksum {
            packet.fill_checksum(src, dst);
        }
    }
}

/// Appends big-endian words to the option area.
struct WordWriter<'b> {
    buf: &'b mut [u8],
    at: usize,
}

impl WordWriter<'_> {
    #[inline]
    fn put(&mut self, word: u32) {
        self.buf[self.at..self.at + 4].copy_from_slice(&word.to_be_bytes());
        self.at += 4;
    }
}

#[cfg(test)]
mod tests;
