//! The receiver's out-of-order queue: segments above a hole wait here until the hole is
//! filled (RFC 9293 §3.10.7.4: "segments with higher beginning sequence numbers ... may be held
//! for later processing"), and the queue names the SACK blocks the next ACK carries
//! (RFC 2018 §4) and the duplicate ranges a D-SACK block reports (RFC 2883 §4).
//!
//! # Positions
//!
//! Everything here is in 64-bit absolute stream positions: the TCB unwraps 32-bit sequence
//! numbers before calling in, so no comparison in this file is modular. A range `(start, end)`
//! is half-open, `[start, end)`, as SACK edges are (RFC 2018 §3: the right edge is "the
//! sequence number immediately following the last sequence number of this block").
//!
//! # Zero copy
//!
//! Payload stays in the received pbufs. Where a new segment overlaps data already held, the
//! held bytes win (they may already have been reported in a SACK block, and RFC 9293
//! §3.10.7.4 lets a receiver keep either copy) and the new segment is cut into the pieces that
//! fill holes: each piece is a [`PBuf::share`] of the same buffer with its own view, so one
//! received frame may be held as several handles, never copied.
//!
//! # Bounds
//!
//! The queue holds whatever the caller inserts: the TCB admits only segments inside its
//! receive window (RFC 9293 §3.10.7.4), which bounds [`OutOfOrderQueue::bytes`] by the window
//! rather than by a fixed segment count, and it also bounds [`OutOfOrderQueue::segments`]
//! (the handles held), so that a peer sending 1-byte segments cannot pin the whole pool; and it
//! admits none while the pool they arrived in is down to its last quarter, so that several
//! such peers cannot either.
//!
//! # Data structure and cost
//!
//! Nothing here allocates once the queue has reached its working size: every container keeps
//! its capacity when it empties, so a connection that keeps losing packets stops allocating
//! after the first few recoveries (no allocation per packet; `tests/alloc_tcp.rs` checks it).
//!
//! - `segs`: a [`VecDeque`] of `(start, PBuf)` sorted by start, the held segments, never empty,
//!   never overlapping. Found by binary search.
//! - `blocks`: the maximal runs of contiguous held bytes (what a SACK block describes). Each is
//!   a node in a slab (a `Vec` whose free slots are chained and reused), so its slot is stable;
//!   a [`VecDeque`] of slots sorted by start finds blocks by position, and a doubly linked list
//!   through the nodes orders them by recency (the newest first), so that choosing the SACK
//!   blocks does not scan every block. There are never more blocks than segments.
//!
//! With S segments and B blocks held, of which a new segment overlaps k held segments, joins m
//! blocks and lands at index i of `segs` and index j of the block index:
//! - [`insert`](OutOfOrderQueue::insert): O(log S + log B + k + m) comparisons, plus moving
//!   min(i, S − i) entries of `segs` for each piece stored and min(j, B − j) slots of the block
//!   index when a block is created or blocks merge (a `VecDeque` shifts the shorter side). The
//!   common cases move nothing or little: a segment above the highest one (new data behind a
//!   hole) is appended, and a retransmission filling the lowest hole lands near the front. The
//!   worst case is a piece landing in the middle of a queue of thousands: a `memmove` of up to
//!   S/2 entries (48 bytes each) per piece, and one of up to B/2 slots (8 bytes each) per
//!   segment; `benches/reasm.rs` measures it (BENCHMARKS.md). A BTreeMap would have paid
//!   O(log S) per piece instead, but allocated a node whenever one filled or emptied.
//! - [`pop_ready`](OutOfOrderQueue::pop_ready): O(1) per segment returned or dropped.
//! - [`sack_blocks`](OutOfOrderQueue::sack_blocks): O(max), plus one step per block lying
//!   entirely below `rcv_nxt` that the caller has not yet drained with `pop_ready`.

use crate::buf::PBuf;
use std::collections::VecDeque;

/// The most SACK blocks a TCP header has room for: 40 option bytes hold a SACK option of
/// 2 + 8·4 = 34 bytes, and only 3 blocks fit beside a 10-byte timestamp option (RFC 2018 §3).
pub const MAX_SACK_BLOCKS: usize = 4;

/// What [`OutOfOrderQueue::insert`] did with a segment `[start, end)`.
///
/// `block` is the contiguous block holding the segment once it is stored (the whole segment
/// is always held afterwards, so it lies in exactly one block). It is the block that
/// [`OutOfOrderQueue::sack_blocks`] reports first until another segment arrives (RFC 2018
/// §4), and the block a D-SACK option names second (RFC 2883 §4, rule (4)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// The buffer was empty: nothing was stored and no recency changed.
    Empty,
    /// Every byte of `[start, end)` was new and is now stored.
    New {
        /// Position of the segment's first byte.
        start: u64,
        /// Position just past the segment's last byte.
        end: u64,
        /// The contiguous block of held bytes that contains the segment, half-open.
        block: (u64, u64),
    },
    /// Every byte of `[start, end)` was already held; the segment was dropped. The whole range
    /// is the D-SACK block (RFC 2883 §4, rule (1)).
    Duplicate {
        /// Position of the segment's first byte.
        start: u64,
        /// Position just past the segment's last byte.
        end: u64,
        /// The contiguous block of held bytes that contains the segment, half-open.
        block: (u64, u64),
    },
    /// Some bytes were held already and some were new.
    PartialDuplicate {
        /// From the first to the end of the last new byte stored. May enclose held bytes when
        /// the segment filled several holes; `new_bytes` counts the new bytes exactly.
        new: (u64, u64),
        /// Bytes of the segment that were new and are now stored.
        new_bytes: usize,
        /// The first contiguous run of duplicated bytes: the D-SACK block (RFC 2883 §4: a
        /// segment that duplicates several separate runs reports one of them; we report the
        /// lowest).
        dup: (u64, u64),
        /// All duplicated bytes of the segment, for counting.
        dup_bytes: usize,
        /// The contiguous block of held bytes that contains the segment, half-open.
        block: (u64, u64),
    },
}

impl Insert {
    /// Bytes newly stored.
    pub fn new_bytes(&self) -> usize {
        match *self {
            Insert::Empty | Insert::Duplicate { .. } => 0,
            Insert::New { start, end, .. } => (end - start) as usize,
            Insert::PartialDuplicate { new_bytes, .. } => new_bytes,
        }
    }

    /// Bytes of the segment that were already held and were dropped.
    pub fn duplicate_bytes(&self) -> usize {
        match *self {
            Insert::Empty | Insert::New { .. } => 0,
            Insert::Duplicate { start, end, .. } => (end - start) as usize,
            Insert::PartialDuplicate { dup_bytes, .. } => dup_bytes,
        }
    }

    /// The D-SACK block to send first in the next ACK (RFC 2883 §4), if any byte was a
    /// duplicate. The caller then appends `sack_blocks(rcv_nxt, max - 1, ..)`, whose first
    /// block is [`Insert::block`], as RFC 2883 §4 rule (4) asks.
    pub fn dsack(&self) -> Option<(u64, u64)> {
        match *self {
            Insert::Empty | Insert::New { .. } => None,
            Insert::Duplicate { start, end, .. } => Some((start, end)),
            Insert::PartialDuplicate { dup, .. } => Some(dup),
        }
    }

    /// The block now holding the segment; `None` for an empty buffer.
    pub fn block(&self) -> Option<(u64, u64)> {
        match *self {
            Insert::Empty => None,
            Insert::New { block, .. } | Insert::Duplicate { block, .. } | Insert::PartialDuplicate { block, .. } => {
                Some(block)
            }
        }
    }
}

/// Counters, for the connection's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasmStats {
    /// Non-empty segments passed to [`OutOfOrderQueue::insert`].
    pub segments_inserted: u64,
    /// Of those, segments whose every byte was already held.
    pub duplicate_segments: u64,
    /// Bytes dropped by `insert` because they were already held.
    pub duplicate_bytes: u64,
    /// Bytes dropped by [`OutOfOrderQueue::pop_ready`] because they lay below `rcv_nxt`.
    pub stale_bytes: u64,
}

/// "No block": the end of the recency list and of the free list.
const NIL: usize = usize::MAX;

/// A maximal run `[start, end)` of contiguous held bytes, in a slot of [`Blocks::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    start: u64,
    end: u64,
    /// The next newer block in the recency list (a segment arrived into it later), or NIL.
    /// For a free slot: unused.
    newer: usize,
    /// The next older block in the recency list, or NIL. For a free slot: the next free slot.
    older: usize,
}

/// The blocks, by position and by recency; see the [module docs](self).
#[derive(Debug)]
struct Blocks {
    /// Slab of block nodes; a slot is live if it appears in `by_pos`, free otherwise.
    nodes: Vec<Block>,
    /// First free slot of `nodes`, chained through `Block::older`.
    free: usize,
    /// Live slots sorted by `start`; blocks are disjoint and never touch.
    by_pos: VecDeque<usize>,
    /// The block a segment most recently arrived into (including a duplicate, and a merge of
    /// blocks by a hole-filling segment), then older ones through `Block::older`.
    newest: usize,
}

impl Default for Blocks {
    fn default() -> Self {
        Blocks { nodes: Vec::new(), free: NIL, by_pos: VecDeque::new(), newest: NIL }
    }
}

impl Blocks {
    fn len(&self) -> usize {
        self.by_pos.len()
    }

    fn at(&self, index: usize) -> &Block {
        &self.nodes[self.by_pos[index]]
    }

    /// Index in `by_pos` of the first block starting at or after `pos`.
    fn first_from(&self, pos: u64) -> usize {
        match self.by_pos.back() {
            // Common case: at or above the highest block's start.
            Some(&last) if self.nodes[last].start < pos => self.by_pos.len(),
            _ => self.by_pos.partition_point(|&slot| self.nodes[slot].start < pos),
        }
    }

    /// A slot for a new node, reusing a free one if any.
    fn alloc(&mut self, start: u64, end: u64) -> usize {
        let node = Block { start, end, newer: NIL, older: NIL };
        if self.free != NIL {
            let slot = self.free;
            self.free = self.nodes[slot].older;
            self.nodes[slot] = node;
            slot
        } else {
            self.nodes.push(node);
            self.nodes.len() - 1
        }
    }

    /// Take `slot` out of the recency list.
    fn unlink(&mut self, slot: usize) {
        let Block { newer, older, .. } = self.nodes[slot];
        if newer == NIL {
            self.newest = older;
        } else {
            self.nodes[newer].older = older;
        }
        if older != NIL {
            self.nodes[older].newer = newer;
        }
    }

    /// Put the unlinked `slot` at the newest end of the recency list.
    fn push_newest(&mut self, slot: usize) {
        self.nodes[slot].newer = NIL;
        self.nodes[slot].older = self.newest;
        if self.newest != NIL {
            self.nodes[self.newest].newer = slot;
        }
        self.newest = slot;
    }

    /// Unlink `slot` and put it on the free list. When no block is left, the slab is reset
    /// (keeping its capacity) so that slots are reused from the start.
    fn release(&mut self, slot: usize) {
        if self.by_pos.is_empty() {
            self.unlink(slot);
            self.nodes.clear();
            self.free = NIL;
        } else {
            self.free_slot(slot);
        }
    }

    /// Unlink `slot` and chain it onto the free list.
    fn free_slot(&mut self, slot: usize) {
        self.unlink(slot);
        self.nodes[slot].older = self.free;
        self.free = slot;
    }

    /// `[lo, hi)` is now entirely held: merge it with the blocks it overlaps or touches into
    /// one block, the newest. Returns that block.
    fn join(&mut self, lo: u64, hi: u64) -> (u64, u64) {
        let mut first = self.first_from(lo);
        if first > 0 && self.at(first - 1).end >= lo {
            first -= 1;
        }
        let mut last = first; // blocks [first, last) are merged
        while last < self.len() && self.at(last).start <= hi {
            last += 1;
        }
        let slot = if first == last {
            let slot = self.alloc(lo, hi);
            self.by_pos.insert(first, slot);
            slot
        } else {
            let slot = self.by_pos[first];
            let end = self.at(last - 1).end;
            for i in first + 1..last {
                self.free_slot(self.by_pos[i]);
            }
            self.by_pos.drain(first + 1..last);
            let b = &mut self.nodes[slot];
            b.start = b.start.min(lo);
            b.end = end.max(hi);
            self.unlink(slot);
            slot
        };
        self.push_newest(slot);
        let b = &self.nodes[slot];
        (b.start, b.end)
    }

    /// The first segment `[start, end)` was removed: the first block now starts at `end`, or
    /// is gone.
    fn advance_first(&mut self, start: u64, end: u64) {
        let Some(&slot) = self.by_pos.front() else { return };
        let b = &mut self.nodes[slot];
        if b.start != start {
            debug_assert!(false, "the first segment starts the first block");
            return;
        }
        if b.end > end {
            b.start = end;
        } else {
            self.by_pos.pop_front();
            self.release(slot);
        }
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.by_pos.clear();
        self.free = NIL;
        self.newest = NIL;
    }
}

/// The held segments, sorted by start; see the [module docs](self).
#[derive(Debug, Default)]
struct Segments {
    q: VecDeque<(u64, PBuf)>,
}

impl Segments {
    /// Index of the first segment starting at or after `pos`.
    fn first_from(&self, pos: u64) -> usize {
        match self.q.back() {
            // Common case: data above everything held.
            Some((last, _)) if *last < pos => self.q.len(),
            _ => self.q.partition_point(|(s, _)| *s < pos),
        }
    }

    /// Start and end of the segment at `index`.
    fn range(&self, index: usize) -> (u64, u64) {
        let (s, b) = &self.q[index];
        (*s, s + b.len() as u64)
    }

    /// The segments in order, as `(start, buffer)`.
    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = (&u64, &PBuf)> + '_ {
        self.q.iter().map(|(s, b)| (s, b))
    }
}

/// The out-of-order queue; see the [module docs](self).
#[derive(Debug, Default)]
pub struct OutOfOrderQueue {
    /// Held segments by start position; non-empty, non-overlapping.
    segs: Segments,
    /// Maximal contiguous runs of `segs`, by position and by recency.
    blocks: Blocks,
    /// Sum of the held views' lengths.
    bytes: usize,
    stats: ReasmStats,
}

impl OutOfOrderQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Store payload `buf` (its view is exactly the payload) starting at `pos`.
    ///
    /// Bytes already held are kept and the new copy of them is dropped; the rest of `buf` is
    /// stored as one handle per hole it fills (the last hole reuses `buf` itself, the others
    /// are [`PBuf::share`]s of it with trimmed views). The block holding the segment becomes
    /// the most recent one, even for a duplicate: RFC 2018 §4 makes the block of the segment
    /// that triggered the ACK the first SACK block, and RFC 2883 §4 names that block right
    /// after the D-SACK block.
    ///
    /// The queue does not know `rcv_nxt`: a segment below it is stored and then dropped by
    /// [`pop_ready`](Self::pop_ready). The caller should trim such data (and D-SACK it, RFC
    /// 2883 §4 rule (2)) before inserting, since duplicates are only detected against the
    /// bytes held here.
    pub fn insert(&mut self, pos: u64, mut buf: PBuf) -> Insert {
        // Keep `pos + len` representable. Positions are 64-bit and never wrap, so this only
        // guards against a caller bug, without panicking.
        let room = u64::MAX - pos;
        if buf.len() as u64 > room {
            let ok = buf.truncate(room as usize).is_ok();
            debug_assert!(ok);
        }
        if buf.is_empty() {
            return Insert::Empty;
        }
        let end = pos + buf.len() as u64;
        self.stats.segments_inserted += 1;

        let mut cur = pos; // everything in [pos, cur) has been stored or found held
        let (mut new_lo, mut new_hi, mut new_bytes) = (u64::MAX, 0u64, 0usize);
        let mut dup: Option<(u64, u64)> = None;
        let mut dup_bytes = 0usize;

        // `i`: the first held segment starting at or after `cur`.
        let mut i = self.segs.first_from(pos);
        // A held segment starting before `pos` may cover the front of the new one.
        if i > 0 {
            let (_, e) = self.segs.range(i - 1);
            if e > pos {
                let de = e.min(end);
                dup = Some((pos, de));
                dup_bytes += (de - pos) as usize;
                cur = de;
            }
        }
        while cur < end {
            // The next held segment starting inside the rest of the new one. None starts
            // before `cur` and ends after it: `cur` is `pos` (checked above) or the end of a
            // held segment, and held segments do not overlap.
            let next = (i < self.segs.q.len()).then(|| self.segs.range(i)).filter(|&(s, _)| s < end);
            match next {
                Some((s, e)) => {
                    if s > cur {
                        // A hole [cur, s) in front of the held segment: fill it with a share.
                        let mut piece = buf.share();
                        let ok = piece.trim_front((cur - pos) as usize).is_ok()
                            && piece.truncate((s - cur) as usize).is_ok();
                        debug_assert!(ok);
                        self.segs.q.insert(i, (cur, piece));
                        i += 1;
                        new_lo = new_lo.min(cur);
                        new_hi = s;
                        new_bytes += (s - cur) as usize;
                    }
                    // Held bytes [s, de) are duplicates. They extend the first duplicate run if
                    // no hole lay between (RFC 2883 reports a contiguous duplicate range).
                    let de = e.min(end);
                    match &mut dup {
                        None => dup = Some((s, de)),
                        Some(d) if d.1 == s => d.1 = de,
                        Some(_) => {}
                    }
                    dup_bytes += (de - s) as usize;
                    cur = de;
                    i += 1;
                }
                None => {
                    // The final hole [cur, end): store `buf` itself, trimmed at the front.
                    let ok = buf.trim_front((cur - pos) as usize).is_ok();
                    debug_assert!(ok);
                    self.segs.q.insert(i, (cur, buf));
                    new_lo = new_lo.min(cur);
                    new_hi = end;
                    new_bytes += (end - cur) as usize;
                    break;
                }
            }
        }

        self.bytes += new_bytes;
        self.stats.duplicate_bytes += dup_bytes as u64;
        let block = self.blocks.join(pos, end);
        match dup {
            None => Insert::New { start: pos, end, block },
            Some(_) if new_bytes == 0 => {
                self.stats.duplicate_segments += 1;
                Insert::Duplicate { start: pos, end, block }
            }
            Some(dup) => Insert::PartialDuplicate { new: (new_lo, new_hi), new_bytes, dup, dup_bytes, block },
        }
    }

    /// Remove and return the first segment if it starts at or before `rcv_nxt` and ends after
    /// it, with its view trimmed to start exactly at `rcv_nxt`; the position returned is
    /// `rcv_nxt`. Segments lying entirely below `rcv_nxt` are dropped on the way (counted in
    /// [`ReasmStats::stale_bytes`]). Call repeatedly, advancing `rcv_nxt` by each returned
    /// length, to drain what a hole fill made contiguous (RFC 9293 §3.10.7.4).
    pub fn pop_ready(&mut self, rcv_nxt: u64) -> Option<(u64, PBuf)> {
        loop {
            let &(start, _) = self.segs.q.front()?;
            if start > rcv_nxt {
                return None;
            }
            let (_, mut buf) = self.segs.q.pop_front()?;
            let len = buf.len();
            let end = start + len as u64;
            self.bytes -= len;
            self.blocks.advance_first(start, end);
            if end <= rcv_nxt {
                self.stats.stale_bytes += len as u64;
                continue;
            }
            let skip = rcv_nxt - start;
            let ok = buf.trim_front(skip as usize).is_ok();
            debug_assert!(ok);
            self.stats.stale_bytes += skip;
            return Some((rcv_nxt, buf));
        }
    }

    /// Write the SACK blocks for the next ACK into `out`, as `[start, end)` positions, and
    /// return how many: at most `max` (3 beside a timestamp option, 4 without, one fewer when a
    /// D-SACK block goes first) and at most [`MAX_SACK_BLOCKS`].
    ///
    /// RFC 2018 §4: the first block MUST be the one holding the most recently received
    /// segment; the others SHOULD repeat the most recently reported blocks, "based on first
    /// SACK blocks in previous SACK options". A block is first in the ACK that follows a
    /// segment's arrival into it, so ordering all blocks by the arrival of their newest segment
    /// gives that order, and each block stays in the next `max` ACKs while at most one new
    /// block appears per ACK: at least three successive ACKs, as §4 wants, even when more
    /// blocks exist than fit. Blocks are disjoint, so none is a subset of another.
    ///
    /// Blocks entirely below `rcv_nxt` are skipped; one reaching across it (the caller has not
    /// drained [`pop_ready`](Self::pop_ready) yet) is reported from `rcv_nxt`.
    pub fn sack_blocks(&self, rcv_nxt: u64, max: usize, out: &mut [(u64, u64); MAX_SACK_BLOCKS]) -> usize {
        let max = max.min(MAX_SACK_BLOCKS);
        let mut n = 0;
        let mut slot = self.blocks.newest;
        while n < max && slot != NIL {
            let b = &self.blocks.nodes[slot];
            if b.end > rcv_nxt {
                out[n] = (b.start.max(rcv_nxt), b.end);
                n += 1;
            }
            slot = b.older;
        }
        n
    }

    /// Payload bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Pbuf handles held. One received buffer cut into pieces counts once per piece, so this
    /// bounds the pool buffers held from above.
    pub fn segments(&self) -> usize {
        self.segs.q.len()
    }

    /// Contiguous blocks held.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Whether no segment is held.
    pub fn is_empty(&self) -> bool {
        self.segs.q.is_empty()
    }

    /// The end of the highest block held.
    pub fn highest(&self) -> Option<u64> {
        self.blocks.by_pos.back().map(|&slot| self.blocks.nodes[slot].end)
    }

    /// The lowest block held, `[start, end)`.
    pub fn first_block(&self) -> Option<(u64, u64)> {
        self.blocks.by_pos.front().map(|&slot| (self.blocks.nodes[slot].start, self.blocks.nodes[slot].end))
    }

    /// The start of the lowest block held.
    pub fn lowest(&self) -> Option<u64> {
        self.blocks.by_pos.front().map(|&slot| self.blocks.nodes[slot].start)
    }

    /// Drop every held pbuf (connection reset or close). Counters are kept, and so is the
    /// capacity of the containers.
    pub fn clear(&mut self) {
        self.segs.q.clear();
        self.blocks.clear();
        self.bytes = 0;
    }

    /// Counters of what the queue was given and dropped.
    pub fn stats(&self) -> ReasmStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
