//! TCP options (RFC 9293 §3.2, RFC 7323, RFC 2018, RFC 2883): the option iterator of a
//! received header, and SACK blocks.

use core::fmt;
use core::iter::FusedIterator;

use super::{opt, Error, Result, MAX_WINDOW_SCALE};

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

/// Iterator over an option byte slice ([`TcpPacket::options`](super::TcpPacket::options)),
/// yielding each option or `Err(BadOption)`.
///
/// Stops after `EndOfList` (the rest is padding) and after the first error: a bad length
/// byte makes everything after it unparseable, and a known option with the wrong length
/// means the header cannot be trusted (RFC 9293 §3.1 asks receivers to be prepared for
/// such options; [`TcpRepr::parse`](super::TcpRepr::parse) rejects the segment).
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
