//! TCP header and options: RFC 9293 §3.1 (header format), RFC 7323 (window scale,
//! timestamps), RFC 2018 and RFC 2883 (SACK, D-SACK).
//!
//! [`TcpPacket`] is a zero-copy view for the receive hot path: once `new_checked` has
//! validated the two lengths, every accessor is a fixed-offset load. The fast path
//! (header prediction, Van Jacobson's `pred_flags`) reads raw big-endian words with
//! [`TcpPacket::word`] and [`TcpPacket::timestamps_fast`] instead of parsing options.
//! [`TcpRepr`] is the fully parsed form, and emits options in exactly Linux's layout.

use core::fmt;
use core::iter::FusedIterator;
use core::ops;

use super::checksum;
use super::{Error, Ipv4Addr, Result};

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
// Options
// ---------------------------------------------------------------------------------------

/// Up to four SACK blocks (RFC 2018 §3), each `(left edge, right edge)`: the left edge is
/// the first sequence number of the block, the right edge the one after its last. With
/// D-SACK (RFC 2883 §4), the first block may report a duplicate.
#[derive(Clone, Copy, Default)]
pub struct SackBlocks {
    blocks: [(u32, u32); SackBlocks::MAX],
    len: u8,
}

impl SackBlocks {
    /// Most blocks one option can carry (40 option bytes: 2 + 4 * 8 = 34).
    pub const MAX: usize = 4;

    /// No blocks.
    #[inline]
    pub const fn new() -> SackBlocks {
        SackBlocks { blocks: [(0, 0); Self::MAX], len: 0 }
    }

    /// Append a block; returns `false` (and drops it) when already holding four.
    #[inline]
    pub fn push(&mut self, left: u32, right: u32) -> bool {
        match self.blocks.get_mut(self.len as usize) {
            Some(slot) => {
                *slot = (left, right);
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// Keep only the first `len` blocks.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len as usize {
            self.len = len as u8;
        }
    }

    /// Remove every block.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The blocks, in option order.
    #[inline]
    pub fn as_slice(&self) -> &[(u32, u32)] {
        &self.blocks[..self.len as usize]
    }

    /// Number of blocks.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there is no block.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

// Equality and Debug look only at the live blocks, not at stale slots past `len`.
impl PartialEq for SackBlocks {
    fn eq(&self, other: &SackBlocks) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SackBlocks {}

impl fmt::Debug for SackBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// One TCP option (RFC 9293 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0: end of the option list; what follows is padding.
    EndOfList,
    /// Kind 1: one byte of alignment.
    NoOperation,
    /// Kind 2 (RFC 9293 §3.7.1): the largest segment the sender can receive.
    MaxSegmentSize(u16),
    /// Kind 3 (RFC 7323 §2): window shift count, already capped at 14 when parsed.
    WindowScale(u8),
    /// Kind 4 (RFC 2018 §2).
    SackPermitted,
    /// Kind 5 (RFC 2018 §3).
    Sack(SackBlocks),
    /// Kind 8 (RFC 7323 §3).
    Timestamps {
        /// TSval: the sender's timestamp clock.
        tsval: u32,
        /// TSecr: the TSval being echoed.
        tsecr: u32,
    },
    /// Any other kind, with the bytes after its length byte.
    Unknown {
        /// The option kind.
        kind: u8,
        /// The option's data (length byte excluded).
        data: &'a [u8],
    },
}

/// Iterator over an option byte slice ([`TcpPacket::options`]), yielding each option or
/// `Err(BadOption)`.
///
/// Stops after `EndOfList` (the rest is padding) and after the first error: a bad length
/// byte makes everything after it unparseable, and a known option with the wrong length
/// means the header cannot be trusted (RFC 9293 §3.1 asks receivers to be prepared for
/// such options; [`TcpRepr::parse`] rejects the segment).
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Iterate over `options`.
    #[inline]
    pub const fn new(options: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { rest: options }
    }

    #[inline]
    fn parse_one(&mut self) -> Option<Result<TcpOption<'a>>> {
        let (&kind, after_kind) = self.rest.split_first()?;
        match kind {
            opt::END_OF_LIST => {
                self.rest = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            opt::NOP => {
                self.rest = after_kind;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        // Every other kind is kind, length (covering both), data (RFC 9293 §3.1).
        let len = match after_kind.first() {
            Some(&len) if len >= 2 && len as usize <= self.rest.len() => len as usize,
            _ => return Some(Err(Error::BadOption)),
        };
        let data = &self.rest[2..len];
        self.rest = &self.rest[len..];
        let option = match (kind, data) {
            (opt::MSS, &[a, b]) => TcpOption::MaxSegmentSize(u16::from_be_bytes([a, b])),
            // RFC 7323 §2.3: a shift above 14 MUST be treated as 14.
            (opt::WINDOW_SCALE, &[shift]) => TcpOption::WindowScale(shift.min(MAX_WINDOW_SCALE)),
            (opt::SACK_PERMITTED, &[]) => TcpOption::SackPermitted,
            (opt::TIMESTAMPS, &[v0, v1, v2, v3, e0, e1, e2, e3]) => TcpOption::Timestamps {
                tsval: u32::from_be_bytes([v0, v1, v2, v3]),
                tsecr: u32::from_be_bytes([e0, e1, e2, e3]),
            },
            (opt::SACK, data) if !data.is_empty() && data.len() % 8 == 0 && data.len() <= 32 => {
                let mut blocks = SackBlocks::new();
                for b in data.chunks_exact(8) {
                    blocks.push(
                        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                        u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
                    );
                }
                TcpOption::Sack(blocks)
            }
            (opt::MSS | opt::WINDOW_SCALE | opt::SACK_PERMITTED | opt::TIMESTAMPS | opt::SACK, _) => {
                return Some(Err(Error::BadOption));
            }
            (kind, data) => TcpOption::Unknown { kind, data },
        };
        Some(Ok(option))
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let item = self.parse_one();
        if let Some(Err(_)) = item {
            self.rest = &[];
        }
        item
    }
}

impl FusedIterator for TcpOptions<'_> {}

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
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// Linux 6.x active open, 10.0.0.1:45678 -> 10.0.0.2:80: MSS 1460, SACK-permitted,
    /// TS, NOP, WS 7 (checksum computed once offline and written in).
    #[rustfmt::skip]
    const LINUX_SYN: [u8; 40] = [
        0xb2, 0x6e, 0x00, 0x50, // ports 45678 -> 80
        0x8f, 0x3c, 0x1d, 0x22, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0xa0, 0x02, 0xfa, 0xf0, // data offset 10, SYN, window 64240
        0xf3, 0x56, 0x00, 0x00, // checksum, urgent
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, 0x08, 0x0a, // SACK-permitted, TS kind/len
        0x9a, 0x3b, 0x4c, 0x5d, // TSval
        0x00, 0x00, 0x00, 0x00, // TSecr
        0x01, 0x03, 0x03, 0x07, // NOP, WS 7
    ];

    /// Linux data segment, PSH|ACK with NOP NOP TS and "hello, world\n" (odd length).
    #[rustfmt::skip]
    const LINUX_DATA: [u8; 45] = [
        0xb2, 0x6e, 0x00, 0x50,
        0x8f, 0x3c, 0x1d, 0x23,
        0x5d, 0x2a, 0x7b, 0x11,
        0x80, 0x18, 0x01, 0xf6, // data offset 8, PSH|ACK, window 502
        0x9d, 0xb6, 0x00, 0x00,
        0x01, 0x01, 0x08, 0x0a,
        0x9a, 0x3b, 0x4c, 0x9b,
        0x1c, 0x2d, 0x3e, 0x4f,
        b'h', b'e', b'l', b'l', b'o', b',', b' ', b'w', b'o', b'r', b'l', b'd', b'\n',
    ];

    /// Linux pure ACK 10.0.0.2:80 -> 10.0.0.1:45678 with NOP NOP TS, NOP NOP SACK 1 block.
    #[rustfmt::skip]
    const LINUX_SACK_ACK: [u8; 44] = [
        0x00, 0x50, 0xb2, 0x6e,
        0x5d, 0x2a, 0x7b, 0x11,
        0x8f, 0x3c, 0x1d, 0x30,
        0xb0, 0x10, 0x01, 0xfb, // data offset 11, ACK, window 507
        0x3c, 0xbf, 0x00, 0x00,
        0x01, 0x01, 0x08, 0x0a,
        0x1c, 0x2d, 0x3e, 0x60,
        0x9a, 0x3b, 0x4c, 0xa0,
        0x01, 0x01, 0x05, 0x0a,
        0x8f, 0x3c, 0x28, 0x80,
        0x8f, 0x3c, 0x2e, 0x20,
    ];

    fn base_repr() -> TcpRepr<'static> {
        TcpRepr {
            src_port: 45678,
            dst_port: 80,
            seq: 0x8f3c_1d22,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 64240,
            urgent: 0,
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            timestamps: None,
            sack_blocks: SackBlocks::new(),
            payload: &[],
        }
    }

    fn sack(blocks: &[(u32, u32)]) -> SackBlocks {
        let mut s = SackBlocks::new();
        for &(l, r) in blocks {
            assert!(s.push(l, r));
        }
        s
    }

    /// Emit `repr` with its payload copied in, checksummed.
    fn emit_vec(repr: &TcpRepr, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
        let mut buf = vec![0xee; repr.buffer_len()];
        let mut packet = TcpPacket::new_unchecked(&mut buf[..]);
        packet.set_header_len(repr.header_len());
        packet.payload_mut().copy_from_slice(repr.payload);
        repr.emit(&mut packet, src, dst, true);
        buf
    }

    fn options(bytes: &[u8]) -> Vec<Result<TcpOption<'_>>> {
        TcpOptions::new(bytes).collect()
    }

    #[test]
    fn linux_syn_fields() {
        let p = TcpPacket::new_checked(&LINUX_SYN[..]).unwrap();
        assert_eq!(p.src_port(), 45678);
        assert_eq!(p.dst_port(), 80);
        assert_eq!(p.seq_number(), 0x8f3c_1d22);
        assert_eq!(p.ack_number(), 0);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), TcpFlags::SYN);
        assert_eq!(p.window_len(), 64240);
        assert_eq!(p.checksum(), 0xf356);
        assert_eq!(p.urgent_at(), 0);
        assert_eq!(p.options().len(), 20);
        assert!(p.payload().is_empty());
        assert_eq!(p.segment_len(), 1);
        assert!(p.verify_checksum(A, B));
        assert!(!p.verify_checksum(B, Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(p.word(0), 0xb26e_0050);
        assert_eq!(p.word(3), 0xa002_faf0);
        assert_eq!(p.word(4), 0xf356_0000);
        assert_eq!(p.timestamps_fast(), None);

        let opts = options(p.options());
        assert_eq!(
            opts,
            [
                Ok(TcpOption::MaxSegmentSize(1460)),
                Ok(TcpOption::SackPermitted),
                Ok(TcpOption::Timestamps { tsval: 0x9a3b_4c5d, tsecr: 0 }),
                Ok(TcpOption::NoOperation),
                Ok(TcpOption::WindowScale(7)),
            ]
        );

        let repr = TcpRepr::parse(&p, A, B, true).unwrap();
        assert_eq!(
            repr,
            TcpRepr {
                max_seg_size: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                timestamps: Some((0x9a3b_4c5d, 0)),
                ..base_repr()
            }
        );
        // One flipped option byte fails verification, but still parses without it.
        let mut bad = LINUX_SYN;
        bad[39] = 8;
        let bad = TcpPacket::new_checked(&bad[..]).unwrap();
        assert_eq!(TcpRepr::parse(&bad, A, B, true), Err(Error::BadChecksum));
        assert_eq!(TcpRepr::parse(&bad, A, B, false).unwrap().window_scale, Some(8));
    }

    #[test]
    fn linux_data_segment() {
        let p = TcpPacket::new_checked(&LINUX_DATA[..]).unwrap();
        assert_eq!(p.header_len(), 32);
        assert_eq!(p.flags(), TcpFlags::PSH | TcpFlags::ACK);
        assert_eq!(p.payload(), b"hello, world\n");
        assert_eq!(p.segment_len(), 13);
        assert_eq!(p.word(5), TS_ONLY_PREFIX);
        assert_eq!(p.timestamps_fast(), Some((0x9a3b_4c9b, 0x1c2d_3e4f)));
        let repr = TcpRepr::parse(&p, A, B, true).unwrap();
        assert_eq!(
            repr,
            TcpRepr {
                seq: 0x8f3c_1d23,
                ack: 0x5d2a_7b11,
                flags: TcpFlags::PSH | TcpFlags::ACK,
                window: 502,
                timestamps: Some((0x9a3b_4c9b, 0x1c2d_3e4f)),
                payload: b"hello, world\n",
                ..base_repr()
            }
        );
        // Emitting the parsed repr reproduces the capture exactly.
        assert_eq!(emit_vec(&repr, A, B), LINUX_DATA);
    }

    #[test]
    fn linux_sack_ack() {
        let p = TcpPacket::new_checked(&LINUX_SACK_ACK[..]).unwrap();
        assert_eq!(p.header_len(), 44);
        assert_eq!(p.flags(), TcpFlags::ACK);
        assert_eq!(p.segment_len(), 0);
        // Header prediction refuses it: SACK means the slow path.
        assert_eq!(p.timestamps_fast(), None);
        let repr = TcpRepr::parse(&p, B, A, true).unwrap();
        assert_eq!(
            repr,
            TcpRepr {
                src_port: 80,
                dst_port: 45678,
                seq: 0x5d2a_7b11,
                ack: 0x8f3c_1d30,
                flags: TcpFlags::ACK,
                window: 507,
                timestamps: Some((0x1c2d_3e60, 0x9a3b_4ca0)),
                sack_blocks: sack(&[(0x8f3c_2880, 0x8f3c_2e20)]),
                ..base_repr()
            }
        );
        assert_eq!(emit_vec(&repr, B, A), LINUX_SACK_ACK);
    }

    #[test]
    fn emit_syn_linux_layout() {
        let repr = TcpRepr {
            max_seg_size: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((0x9a3b_4c5d, 0)),
            ..base_repr()
        };
        assert_eq!(repr.header_len(), 40);
        assert_eq!(emit_vec(&repr, A, B), LINUX_SYN);
    }

    fn round_trip(repr: &TcpRepr, header_len: usize) {
        assert_eq!(repr.header_len(), header_len);
        let buf = emit_vec(repr, A, B);
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.header_len(), header_len);
        assert_eq!(TcpRepr::parse(&p, A, B, true).unwrap(), *repr);
    }

    #[test]
    fn round_trips() {
        let syn_ack = TcpRepr { flags: TcpFlags::SYN | TcpFlags::ACK, ack: 7, max_seg_size: Some(536), ..base_repr() };
        round_trip(&syn_ack, 24);
        let buf = emit_vec(&syn_ack, A, B);
        assert_eq!(buf[20..], [2, 4, 0x02, 0x18]);

        // SYN with TS but no SACK-permitted, and SACK-permitted alone: NOP-padded.
        let syn_ts = TcpRepr { timestamps: Some((1, 2)), window_scale: Some(0), ..base_repr() };
        round_trip(&syn_ts, 36);
        assert_eq!(emit_vec(&syn_ts, A, B)[20..24], [1, 1, 8, 10]);
        assert_eq!(emit_vec(&syn_ts, A, B)[32..36], [1, 3, 3, 0]);
        let syn_sp = TcpRepr { sack_permitted: true, ..base_repr() };
        round_trip(&syn_sp, 24);
        assert_eq!(emit_vec(&syn_sp, A, B)[20..], [1, 1, 4, 2]);

        let data = TcpRepr {
            flags: TcpFlags::PSH | TcpFlags::ACK,
            ack: 99,
            timestamps: Some((0xdead_beef, 0x0102_0304)),
            payload: b"odd payload",
            ..base_repr()
        };
        round_trip(&data, 32);
        let buf = emit_vec(&data, A, B);
        assert_eq!(TcpPacket::new_checked(&buf[..]).unwrap().timestamps_fast(), Some((0xdead_beef, 0x0102_0304)));

        let three = sack(&[(10, 20), (30, 40), (50, 60)]);
        let ack_ts_sack = TcpRepr { flags: TcpFlags::ACK, timestamps: Some((5, 6)), sack_blocks: three, ..base_repr() };
        assert_eq!(ack_ts_sack.emitted_sack_blocks(), 3);
        round_trip(&ack_ts_sack, 60);
        let buf = emit_vec(&ack_ts_sack, A, B);
        assert_eq!(buf[20..24], [1, 1, 8, 10]);
        assert_eq!(buf[32..36], [1, 1, 5, 26]);

        let four = sack(&[(1, 2), (3, 4), (5, 6), (7, 8)]);
        let ack_sack = TcpRepr { flags: TcpFlags::ACK, sack_blocks: four, ..base_repr() };
        round_trip(&ack_sack, 56);
        assert_eq!(emit_vec(&ack_sack, A, B)[20..24], [1, 1, 5, 34]);
    }

    #[test]
    fn sack_blocks_dropped_when_full() {
        // TS + 4 blocks: only 3 fit (Linux does the same).
        let four = sack(&[(1, 2), (3, 4), (5, 6), (7, 8)]);
        let repr = TcpRepr { flags: TcpFlags::ACK, timestamps: Some((5, 6)), sack_blocks: four, ..base_repr() };
        assert_eq!(repr.emitted_sack_blocks(), 3);
        assert_eq!(repr.header_len(), 60);
        let buf = emit_vec(&repr, A, B);
        let parsed = TcpRepr::parse(&TcpPacket::new_checked(&buf[..]).unwrap(), A, B, true).unwrap();
        assert_eq!(parsed.sack_blocks.as_slice(), &four.as_slice()[..3]);

        // Every option at once leaves room for two blocks only (20 + 4 + 16 = 40).
        let all = TcpRepr {
            max_seg_size: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((1, 2)),
            sack_blocks: four,
            ..base_repr()
        };
        assert_eq!(all.emitted_sack_blocks(), 2);
        assert_eq!(all.header_len(), 60);
        let buf = emit_vec(&all, A, B);
        let parsed = TcpRepr::parse(&TcpPacket::new_checked(&buf[..]).unwrap(), A, B, true).unwrap();
        assert_eq!(parsed, TcpRepr { sack_blocks: sack(&[(1, 2), (3, 4)]), ..all });
    }

    #[test]
    fn option_edge_cases() {
        use TcpOption::*;
        // Length 0 and 1 would loop forever or underflow; both are errors, then stop.
        assert_eq!(options(&[1, 0x1e, 0, 1, 1]), [Ok(NoOperation), Err(Error::BadOption)]);
        assert_eq!(options(&[0x1e, 1, 1, 1]), [Err(Error::BadOption)]);
        // Length past the end, and a kind with no length byte at all.
        assert_eq!(options(&[1, 1, 8, 10, 0, 0, 0, 0]), [Ok(NoOperation), Ok(NoOperation), Err(Error::BadOption)]);
        assert_eq!(options(&[2]), [Err(Error::BadOption)]);
        // Unknown kind (30, MPTCP) skipped by its length.
        assert_eq!(
            options(&[2, 4, 0x05, 0xb4, 30, 4, 0xaa, 0xbb, 3, 3, 2]),
            [Ok(MaxSegmentSize(1460)), Ok(Unknown { kind: 30, data: &[0xaa, 0xbb] }), Ok(WindowScale(2))]
        );
        // EOL ends the list; the garbage after it is padding.
        assert_eq!(options(&[1, 0, 0x1e, 0, 0xff]), [Ok(NoOperation), Ok(EndOfList)]);
        // Known kinds with the wrong length.
        assert_eq!(options(&[2, 3, 5, 1]), [Err(Error::BadOption)]);
        assert_eq!(options(&[2, 5, 5, 0xb4, 0]), [Err(Error::BadOption)]);
        assert_eq!(options(&[3, 4, 7, 0]), [Err(Error::BadOption)]);
        assert_eq!(options(&[4, 3, 0, 1]), [Err(Error::BadOption)]);
        assert_eq!(options(&[8, 8, 0, 0, 0, 0, 0, 0]), [Err(Error::BadOption)]);
        assert_eq!(options(&[5, 2]), [Err(Error::BadOption)]);
        assert_eq!(options(&[5, 9, 0, 0, 0, 0, 0, 0, 0]), [Err(Error::BadOption)]);
        // SACK with 5 blocks (length 42) cannot even fit a header; rejected regardless.
        let mut five = vec![5, 42];
        five.extend((0..40).map(|i| i as u8));
        assert_eq!(options(&five), [Err(Error::BadOption)]);
        // Four blocks is the most.
        let mut four = vec![5, 34];
        four.extend([0u8; 32]);
        assert!(matches!(options(&four)[..], [Ok(Sack(b))] if b.len() == 4));
        // RFC 7323 §2.3: shift 15 is used as 14.
        assert_eq!(options(&[3, 3, 15, 0]), [Ok(WindowScale(14)), Ok(EndOfList)]);
        assert_eq!(options(&[3, 3, 255]), [Ok(WindowScale(14))]);
        assert!(options(&[]).is_empty());
    }

    #[test]
    fn parse_rejects_bad_options() {
        let mut seg = LINUX_SYN;
        seg[21] = 3; // MSS length 3
        let p = TcpPacket::new_checked(&seg[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, A, B, false), Err(Error::BadOption));
        // new_checked does not look at options.
        seg[21] = 0;
        assert!(TcpPacket::new_checked(&seg[..]).is_ok());
        let p = TcpPacket::new_checked(&seg[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p, A, B, false), Err(Error::BadOption));
    }

    #[test]
    fn truncation_and_bad_offsets() {
        for n in 0..LINUX_SYN.len() {
            let r = TcpPacket::new_checked(&LINUX_SYN[..n]);
            assert_eq!(r, Err(Error::Truncated), "prefix {n}");
        }
        for n in 0..LINUX_DATA.len() {
            let prefix = &LINUX_DATA[..n];
            let parsed = TcpPacket::new_checked(prefix).and_then(|p| TcpRepr::parse(&p, A, B, true));
            assert!(parsed.is_err(), "prefix {n}");
            // Without verification, prefixes past the header parse as shorter payloads.
            let unverified = TcpPacket::new_checked(prefix).and_then(|p| TcpRepr::parse(&p, A, B, false));
            assert_eq!(unverified.is_ok(), n >= 32, "prefix {n}");
        }
        let mut seg = LINUX_DATA;
        for off in 0..5u8 {
            seg[12] = off << 4;
            assert_eq!(TcpPacket::new_checked(&seg[..]), Err(Error::BadHeaderLength));
        }
        // Data offset 15 (60 bytes) in a 45-byte segment.
        seg[12] = 0xf0;
        assert_eq!(TcpPacket::new_checked(&seg[..]), Err(Error::Truncated));
        // An unchecked view still cannot make parse panic.
        let p = TcpPacket::new_unchecked(&seg[..]);
        assert_eq!(TcpRepr::parse(&p, A, B, false), Err(Error::Truncated));
    }

    #[test]
    fn payload_sum_matches_full_checksum() {
        for payload in [&b""[..], b"x", b"ab", b"hello, world\n", b"even length!"] {
            let repr =
                TcpRepr { flags: TcpFlags::ACK | TcpFlags::PSH, timestamps: Some((123, 456)), payload, ..base_repr() };
            let full = emit_vec(&repr, A, B);

            let mut buf = vec![0u8; repr.buffer_len()];
            let mut packet = TcpPacket::new_unchecked(&mut buf[..]);
            repr.emit(&mut packet, A, B, false);
            let psum = checksum::copy_and_sum(packet.payload_mut(), payload);
            packet.fill_checksum_with_payload_sum(A, B, psum);
            assert_eq!(buf, full, "payload {payload:?}");
            assert!(TcpPacket::new_checked(&buf[..]).unwrap().verify_checksum(A, B));
        }
    }

    #[test]
    fn setters() {
        let mut buf = LINUX_DATA;
        let mut p = TcpPacket::new_checked(&mut buf[..]).unwrap();
        p.set_flags(TcpFlags::FIN | TcpFlags::ACK);
        assert_eq!(p.header_len(), 32);
        assert_eq!(p.segment_len(), 14);
        p.set_header_len(20);
        assert_eq!(p.flags(), TcpFlags::FIN | TcpFlags::ACK);
        assert_eq!(p.options(), b"");
        assert_eq!(p.payload().len(), 25);
        p.set_header_len(24);
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_seq_number(3);
        p.set_ack_number(4);
        p.set_window_len(5);
        p.set_urgent_at(6);
        p.fill_checksum(A, B);
        let header_sum = p.header_sum();
        assert_eq!(header_sum, checksum::sum(&buf[..24]));
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()), (1, 2, 3, 4));
        assert_eq!((p.window_len(), p.urgent_at()), (5, 6));
        assert!(p.verify_checksum(A, B));
    }

    #[test]
    fn flags() {
        let f = TcpFlags::SYN | TcpFlags::ACK;
        assert_eq!(f.to_string(), "S.");
        assert_eq!(format!("{f:?}"), "S.");
        assert_eq!((TcpFlags::FIN | TcpFlags::ACK).to_string(), "F.");
        assert_eq!((TcpFlags::PSH | TcpFlags::ACK).to_string(), "P.");
        assert_eq!(TcpFlags::ACK.to_string(), ".");
        assert_eq!(TcpFlags::RST.to_string(), "R");
        assert_eq!((TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR).to_string(), "SEW");
        assert_eq!((TcpFlags::URG | TcpFlags::AE).to_string(), "Ue");
        assert_eq!(TcpFlags::NONE.to_string(), "none");
        assert!(f.contains(TcpFlags::SYN) && !f.contains(TcpFlags::SYN | TcpFlags::FIN));
        assert!(f.intersects(TcpFlags::SYN | TcpFlags::FIN));
        assert_eq!(f & TcpFlags::ACK, TcpFlags::ACK);
        assert_eq!(!f & f, TcpFlags::NONE);
        assert_eq!((!TcpFlags::NONE).bits(), 0x0fff);
        assert!(TcpFlags::NONE.is_empty() && !f.is_empty());
        assert_eq!(TcpFlags::from_bits(0xf012), TcpFlags::SYN | TcpFlags::ACK);
    }

    #[test]
    fn sack_blocks() {
        let mut s = SackBlocks::new();
        assert!(s.is_empty());
        for i in 0..4 {
            assert!(s.push(i, i + 1));
        }
        assert!(!s.push(9, 9));
        assert_eq!(s.len(), 4);
        assert_eq!(s.as_slice()[3], (3, 4));
        let mut t = s;
        t.truncate(1);
        assert_eq!(t, sack(&[(0, 1)]));
        assert_ne!(t, s);
        t.clear();
        assert_eq!(t, SackBlocks::new());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn arb_sack() -> impl Strategy<Value = SackBlocks> {
            prop::collection::vec(any::<(u32, u32)>(), 0..=4).prop_map(|v| {
                let mut s = SackBlocks::new();
                for (l, r) in v {
                    s.push(l, r);
                }
                s
            })
        }

        proptest! {
            /// Arbitrary bytes: no panic, and the options iterator ends after at most one error.
            #[test]
            fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
                if let Ok(p) = TcpPacket::new_checked(&bytes[..]) {
                    let opts: Vec<_> = p.options_iter().collect();
                    prop_assert!(opts.iter().rev().skip(1).all(|o| o.is_ok()));
                    let _ = (p.segment_len(), p.timestamps_fast(), p.header_sum(), p.verify_checksum(A, B));
                    if let Ok(repr) = TcpRepr::parse(&p, A, B, false) {
                        prop_assert!(repr.window_scale.is_none_or(|s| s <= MAX_WINDOW_SCALE));
                        prop_assert_eq!(repr.payload.len() + p.header_len(), bytes.len());
                    }
                }
            }

            /// emit then parse gives the repr back, minus SACK blocks that did not fit.
            #[test]
            fn repr_round_trip(
                ports in any::<(u16, u16)>(),
                seq_ack in any::<(u32, u32)>(),
                flags in 0u16..0x1000,
                window in any::<u16>(),
                urgent in any::<u16>(),
                max_seg_size in any::<Option<u16>>(),
                window_scale in prop::option::of(0u8..=14),
                sack_permitted in any::<bool>(),
                timestamps in any::<Option<(u32, u32)>>(),
                sack_blocks in arb_sack(),
                payload in prop::collection::vec(any::<u8>(), 0..40),
            ) {
                let repr = TcpRepr {
                    src_port: ports.0,
                    dst_port: ports.1,
                    seq: seq_ack.0,
                    ack: seq_ack.1,
                    flags: TcpFlags::from_bits(flags),
                    window,
                    urgent,
                    max_seg_size,
                    window_scale,
                    sack_permitted,
                    timestamps,
                    sack_blocks,
                    payload: &payload,
                };
                prop_assert!(repr.header_len() <= MAX_HEADER_LEN && repr.header_len() % 4 == 0);
                let buf = emit_vec(&repr, A, B);
                let p = TcpPacket::new_checked(&buf[..]).unwrap();
                let parsed = TcpRepr::parse(&p, A, B, true).unwrap();
                let mut expected = repr;
                expected.sack_blocks.truncate(repr.emitted_sack_blocks());
                prop_assert_eq!(parsed, expected);
                if !sack_blocks.is_empty() && max_seg_size.is_none() && window_scale.is_none() {
                    // Linux's counts: all four without timestamps, three with them.
                    let room = if timestamps.is_some() { 3 } else { 4 };
                    prop_assert_eq!(repr.emitted_sack_blocks(), sack_blocks.len().min(room));
                }
            }
        }
    }
}
