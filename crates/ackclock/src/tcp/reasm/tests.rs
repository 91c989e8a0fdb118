use super::*;
use crate::buf::{Pool, PoolConfig};
use proptest::prelude::*;

fn pool(buffers: usize) -> Pool {
    Pool::new(PoolConfig { buffers, buffer_size: 2048, headroom: 128 }).unwrap()
}

/// The byte the sender put at stream position `p`.
fn pat(p: u64) -> u8 {
    (p.wrapping_mul(131) ^ (p >> 8) ^ (p >> 19)) as u8
}

/// A received segment: `len` bytes of the stream at `pos`.
fn seg(pool: &Pool, pos: u64, len: u64) -> PBuf {
    let mut b = pool.alloc().unwrap();
    for (i, byte) in b.append(len as usize).unwrap().iter_mut().enumerate() {
        *byte = pat(pos + i as u64);
    }
    b
}

/// Drain what is ready, checking every byte against the pattern; returns bytes drained.
fn drain(q: &mut OutOfOrderQueue, rcv_nxt: &mut u64) -> u64 {
    let before = *rcv_nxt;
    while let Some((pos, b)) = q.pop_ready(*rcv_nxt) {
        assert_eq!(pos, *rcv_nxt);
        assert!(!b.is_empty());
        for (i, &byte) in b.data().iter().enumerate() {
            assert_eq!(byte, pat(pos + i as u64), "byte at {}", pos + i as u64);
        }
        *rcv_nxt += b.len() as u64;
    }
    *rcv_nxt - before
}

fn sacks(q: &OutOfOrderQueue, rcv_nxt: u64, max: usize) -> Vec<(u64, u64)> {
    let mut out = [(0, 0); MAX_SACK_BLOCKS];
    let n = q.sack_blocks(rcv_nxt, max, &mut out);
    out[..n].to_vec()
}

/// Every structural invariant of the queue.
fn check(q: &OutOfOrderQueue) {
    let mut sum = 0;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (&s, b) in q.segs.iter() {
        assert!(!b.is_empty(), "empty segment held at {s}");
        sum += b.len();
        let e = s + b.len() as u64;
        match runs.last_mut() {
            Some(last) if last.1 > s => panic!("segment at {s} overlaps one ending at {}", last.1),
            Some(last) if last.1 == s => last.1 = e,
            _ => runs.push((s, e)),
        }
    }
    assert_eq!(q.bytes(), sum);
    let bl = &q.blocks;
    let blocks: Vec<(u64, u64)> = bl.by_pos.iter().map(|&slot| (bl.nodes[slot].start, bl.nodes[slot].end)).collect();
    assert_eq!(blocks, runs, "blocks are the maximal runs of the segments");
    // The recency list holds every live block exactly once, linked both ways.
    let mut live = vec![false; bl.nodes.len()];
    for &slot in &bl.by_pos {
        assert!(!live[slot], "slot {slot} indexed twice");
        live[slot] = true;
    }
    let (mut slot, mut newer, mut listed) = (bl.newest, NIL, 0);
    while slot != NIL {
        assert!(live[slot], "recency list reaches slot {slot}, which holds no block");
        assert_eq!(bl.nodes[slot].newer, newer);
        listed += 1;
        assert!(listed <= bl.len(), "recency list loops");
        (newer, slot) = (slot, bl.nodes[slot].older);
    }
    assert_eq!(listed, bl.len());
    // Every other slot is free, on the free list once.
    let (mut slot, mut free) = (bl.free, 0);
    while slot != NIL {
        assert!(!live[slot], "free slot {slot} holds a block");
        live[slot] = true;
        free += 1;
        assert!(free <= bl.nodes.len());
        slot = bl.nodes[slot].older;
    }
    assert_eq!(free + bl.len(), bl.nodes.len(), "no slot is leaked");
}

#[test]
fn several_holes_fill_and_drain_in_order() {
    let p = pool(16);
    let mut q = OutOfOrderQueue::new();
    let mut rcv_nxt = 1000;
    // Ten segments of 100 bytes; the odd ones arrive, then the even ones but the first.
    for i in [1, 3, 5, 7, 9, 2, 4, 6, 8] {
        let r = q.insert(1000 + i * 100, seg(&p, 1000 + i * 100, 100));
        assert_eq!(r.new_bytes(), 100);
        check(&q);
        assert_eq!(drain(&mut q, &mut rcv_nxt), 0, "the first hole is still open");
    }
    assert_eq!((q.bytes(), q.segments(), q.blocks()), (900, 9, 1));
    assert_eq!((q.lowest(), q.highest()), (Some(1100), Some(2000)));
    q.insert(1000, seg(&p, 1000, 100));
    assert_eq!(drain(&mut q, &mut rcv_nxt), 1000);
    assert_eq!(rcv_nxt, 2000);
    assert!(q.is_empty());
    assert_eq!((q.bytes(), q.blocks(), q.highest()), (0, 0, None));
    check(&q);
    assert_eq!(p.available(), p.capacity());
}

#[test]
fn reverse_arrival() {
    let p = pool(16);
    let mut q = OutOfOrderQueue::new();
    for i in (0..10u64).rev() {
        let r = q.insert(i * 10, seg(&p, i * 10, 10));
        assert_eq!(r, Insert::New { start: i * 10, end: i * 10 + 10, block: (i * 10, 100) });
        check(&q);
        assert_eq!(q.blocks(), 1);
    }
    let mut rcv_nxt = 0;
    assert_eq!(drain(&mut q, &mut rcv_nxt), 100);
    assert_eq!(p.available(), p.capacity());
}

#[test]
fn empty_buffers_are_ignored() {
    let p = pool(2);
    let mut q = OutOfOrderQueue::new();
    assert_eq!(q.insert(5, p.alloc().unwrap()), Insert::Empty);
    assert!(q.is_empty());
    assert_eq!(q.stats(), ReasmStats::default());
    assert_eq!(Insert::Empty.dsack(), None);
    assert_eq!(Insert::Empty.block(), None);
    // A segment reaching past the end of the position space is cut, not a panic.
    assert_eq!(q.insert(u64::MAX - 3, seg(&p, 0, 10)).block(), Some((u64::MAX - 3, u64::MAX)));
    assert_eq!(q.bytes(), 3);
    assert_eq!(p.available(), 1);
}

#[test]
fn exact_duplicate() {
    let p = pool(4);
    let mut q = OutOfOrderQueue::new();
    q.insert(100, seg(&p, 100, 100));
    let r = q.insert(100, seg(&p, 100, 100));
    assert_eq!(r, Insert::Duplicate { start: 100, end: 200, block: (100, 200) });
    assert_eq!((r.dsack(), r.new_bytes(), r.duplicate_bytes()), (Some((100, 200)), 0, 100));
    assert_eq!((q.bytes(), q.segments()), (100, 1));
    assert_eq!(p.available(), 3, "the duplicate's buffer went back to the pool");
    // A duplicate of part of one segment, and one covering two adjacent segments.
    q.insert(200, seg(&p, 200, 50));
    let r = q.insert(120, seg(&p, 120, 20));
    assert_eq!(r, Insert::Duplicate { start: 120, end: 140, block: (100, 250) });
    let r = q.insert(150, seg(&p, 150, 80));
    assert_eq!(r, Insert::Duplicate { start: 150, end: 230, block: (100, 250) });
    let s = q.stats();
    assert_eq!((s.segments_inserted, s.duplicate_segments, s.duplicate_bytes), (5, 3, 200));
    check(&q);
}

#[test]
fn overlap_on_the_left() {
    let p = pool(4);
    let mut q = OutOfOrderQueue::new();
    q.insert(200, seg(&p, 200, 100));
    let r = q.insert(150, seg(&p, 150, 100));
    assert_eq!(
        r,
        Insert::PartialDuplicate { new: (150, 200), new_bytes: 50, dup: (200, 250), dup_bytes: 50, block: (150, 300) }
    );
    assert_eq!(r.dsack(), Some((200, 250)));
    assert_eq!(q.segs.iter().map(|(&s, b)| (s, b.len())).collect::<Vec<_>>(), [(150, 50), (200, 100)]);
    check(&q);
    let mut rcv_nxt = 150;
    assert_eq!(drain(&mut q, &mut rcv_nxt), 150);
    assert_eq!(p.available(), p.capacity());
}

#[test]
fn overlap_on_the_right() {
    let p = pool(4);
    let mut q = OutOfOrderQueue::new();
    q.insert(200, seg(&p, 200, 100));
    let r = q.insert(250, seg(&p, 250, 100));
    assert_eq!(
        r,
        Insert::PartialDuplicate { new: (300, 350), new_bytes: 50, dup: (250, 300), dup_bytes: 50, block: (200, 350) }
    );
    assert_eq!(q.segs.iter().map(|(&s, b)| (s, b.len())).collect::<Vec<_>>(), [(200, 100), (300, 50)]);
    check(&q);
    let mut rcv_nxt = 200;
    assert_eq!(drain(&mut q, &mut rcv_nxt), 150);
}

#[test]
fn overlap_spanning_several_segments_and_holes() {
    let p = pool(8);
    let mut q = OutOfOrderQueue::new();
    for (s, l) in [(200, 100), (400, 100), (500, 50), (700, 100), (900, 10)] {
        q.insert(s, seg(&p, s, l));
    }
    let big = seg(&p, 150, 600);
    let index = big.index();
    let r = q.insert(150, big);
    // New: [150,200) [300,400) [550,700). Held: [200,300) [400,550) [700,750).
    assert_eq!(
        r,
        Insert::PartialDuplicate {
            new: (150, 700),
            new_bytes: 300,
            dup: (200, 300),
            dup_bytes: 300,
            block: (150, 800)
        }
    );
    check(&q);
    let held: Vec<(u64, usize, bool)> = q.segs.iter().map(|(&s, b)| (s, b.len(), b.index() == index)).collect();
    assert_eq!(
        held,
        [
            (150, 50, true),
            (200, 100, false),
            (300, 100, true),
            (400, 100, false),
            (500, 50, false),
            (550, 150, true),
            (700, 100, false),
            (900, 10, false)
        ],
        "the new segment is held as three views of one buffer"
    );
    assert_eq!(p.available(), 2);
    assert_eq!(sacks(&q, 150, 4), [(150, 800), (900, 910)]);
    let mut rcv_nxt = 150;
    assert_eq!(drain(&mut q, &mut rcv_nxt), 650);
    assert_eq!(q.segments(), 1);
    q.clear();
    assert_eq!(p.available(), p.capacity());
}

#[test]
fn duplicate_runs_are_contiguous_and_the_first_is_reported() {
    let p = pool(8);
    let mut q = OutOfOrderQueue::new();
    // Held [100,200) [200,300) (adjacent), then [400,500).
    for s in [100, 200, 400] {
        q.insert(s, seg(&p, s, 100));
    }
    let r = q.insert(150, seg(&p, 150, 300));
    assert_eq!(
        r,
        Insert::PartialDuplicate {
            new: (300, 400),
            new_bytes: 100,
            dup: (150, 300),
            dup_bytes: 200,
            block: (100, 500)
        }
    );
    check(&q);
}

#[test]
fn below_rcv_nxt_is_trimmed_or_dropped() {
    let p = pool(8);
    let mut q = OutOfOrderQueue::new();
    q.insert(10, seg(&p, 10, 30)); // entirely below
    q.insert(50, seg(&p, 50, 100)); // straddles 100
    q.insert(300, seg(&p, 300, 10)); // above a hole
    assert_eq!(sacks(&q, 100, 4), [(300, 310), (100, 150)], "stale blocks skipped, straddling one clipped");
    let (pos, b) = q.pop_ready(100).unwrap();
    assert_eq!((pos, b.len()), (100, 50));
    assert!(b.data().iter().enumerate().all(|(i, &x)| x == pat(100 + i as u64)));
    assert!(q.pop_ready(150).is_none());
    assert_eq!((q.bytes(), q.segments(), q.stats().stale_bytes), (10, 1, 80));
    check(&q);
    assert!(q.pop_ready(400).is_none(), "a segment wholly below rcv_nxt is dropped, not returned");
    assert!(q.is_empty());
    drop(b);
    assert_eq!(p.available(), p.capacity());
}

/// RFC 2018 §5: left window edge 5000, a burst of 8 segments of 500 bytes.
#[test]
fn rfc2018_section5_examples() {
    let p = pool(16);
    let s = |i: u64| 5000 + 500 * i;

    // Case 1: the first 4 arrive, the last 4 are dropped: ACK 7000, no SACK option.
    let mut q = OutOfOrderQueue::new();
    let mut rcv_nxt = 5000;
    for i in 0..4 {
        q.insert(s(i), seg(&p, s(i), 500));
        drain(&mut q, &mut rcv_nxt);
    }
    assert_eq!((rcv_nxt, sacks(&q, rcv_nxt, 3)), (7000, vec![]));

    // Case 2: the first is dropped, the other 7 arrive; each ACK is 5000 with one block.
    let mut q = OutOfOrderQueue::new();
    let mut rcv_nxt = 5000;
    for i in 1..8 {
        q.insert(s(i), seg(&p, s(i), 500));
        drain(&mut q, &mut rcv_nxt);
        assert_eq!((rcv_nxt, sacks(&q, rcv_nxt, 3)), (5000, vec![(5500, s(i) + 500)]));
    }

    // Case 3: the 2nd, 4th, 6th and 8th are dropped.
    let mut q = OutOfOrderQueue::new();
    let mut rcv_nxt = 5000;
    let mut ack = |q: &mut OutOfOrderQueue, pos: u64| {
        q.insert(pos, seg(&p, pos, 500));
        check(q);
        drain(q, &mut rcv_nxt);
        (rcv_nxt, sacks(q, rcv_nxt, 3))
    };
    assert_eq!(ack(&mut q, 5000), (5500, vec![]));
    assert_eq!(ack(&mut q, 6000), (5500, vec![(6000, 6500)]));
    assert_eq!(ack(&mut q, 7000), (5500, vec![(7000, 7500), (6000, 6500)]));
    assert_eq!(ack(&mut q, 8000), (5500, vec![(8000, 8500), (7000, 7500), (6000, 6500)]));
    // "Suppose at this point, the 4th packet is received out of order": the receiver has
    // only two blocks to report, and the merged block goes first.
    assert_eq!(ack(&mut q, 6500), (5500, vec![(6000, 7500), (8000, 8500)]));
    // "Suppose at this point, the 2nd segment is received."
    assert_eq!(ack(&mut q, 5500), (7500, vec![(8000, 8500)]));
}

#[test]
fn recency_decides_which_blocks_fit() {
    let p = pool(16);
    let mut q = OutOfOrderQueue::new();
    // Six isolated blocks A..F, arriving in order, above rcv_nxt = 0.
    let at = |i: u64| 1000 * (i + 1);
    for i in 0..6 {
        q.insert(at(i), seg(&p, at(i), 100));
    }
    let blk = |i: u64| (at(i), at(i) + 100);
    assert_eq!(sacks(&q, 0, 4), [blk(5), blk(4), blk(3), blk(2)]);
    assert_eq!(sacks(&q, 0, 3), [blk(5), blk(4), blk(3)]);
    assert_eq!(sacks(&q, 0, 9), sacks(&q, 0, 4), "never more than fit in a header");
    // A duplicate arriving into B makes B first (RFC 2018 §4, RFC 2883 §4 rule (4)).
    let r = q.insert(at(1) + 10, seg(&p, at(1) + 10, 50));
    assert_eq!((r.dsack(), r.block()), (Some((at(1) + 10, at(1) + 60)), Some(blk(1))));
    assert_eq!(sacks(&q, 0, 4), [blk(1), blk(5), blk(4), blk(3)]);
    // A segment extending A makes the extended A first.
    q.insert(at(0) + 100, seg(&p, at(0) + 100, 100));
    assert_eq!(sacks(&q, 0, 3), [(at(0), at(0) + 200), blk(1), blk(5)]);
    // A segment joining E and F: the merged block is first, and D comes back into view.
    q.insert(at(4) + 100, seg(&p, at(4) + 100, 900));
    assert_eq!(sacks(&q, 0, 4), [(at(4), at(5) + 100), (at(0), at(0) + 200), blk(1), blk(3)]);
    // Blocks below rcv_nxt are never reported.
    assert_eq!(sacks(&q, at(3) + 100, 4), [(at(4), at(5) + 100)]);
    check(&q);
}

#[test]
fn each_block_is_reported_in_three_successive_acks() {
    let p = pool(64);
    let mut q = OutOfOrderQueue::new();
    let acks: Vec<Vec<(u64, u64)>> = (1..=20u64)
        .map(|i| {
            q.insert(i * 100, seg(&p, i * 100, 10));
            sacks(&q, 0, 3)
        })
        .collect();
    for (i, ack) in acks.iter().enumerate() {
        let b = (((i + 1) * 100) as u64, ((i + 1) * 100 + 10) as u64);
        assert_eq!(ack[0], b);
        for later in acks.iter().skip(i).take(3) {
            assert!(later.contains(&b));
        }
    }
}

#[test]
fn clear_returns_every_buffer() {
    let p = pool(8);
    let mut q = OutOfOrderQueue::new();
    q.insert(100, seg(&p, 100, 10));
    q.insert(300, seg(&p, 300, 10));
    q.insert(50, seg(&p, 50, 400));
    assert_eq!((q.segments(), p.available()), (5, 5));
    q.clear();
    assert!(q.is_empty());
    assert_eq!((q.bytes(), q.blocks(), sacks(&q, 0, 4)), (0, 0, vec![]));
    check(&q);
    assert_eq!(p.available(), p.capacity());
}

/// One arrival in the property test.
#[derive(Debug, Clone)]
struct Arrival {
    start: u64,
    len: u64,
    /// The simulated TCB trims data below rcv_nxt before inserting.
    trim: bool,
    /// The simulated TCB drains the queue after this arrival.
    drain: bool,
}

const W: u64 = 6000;

fn arrivals() -> impl Strategy<Value = (u64, Vec<Arrival>)> {
    let extra = prop::collection::vec((0..W, 0..=1500u64, any::<bool>(), any::<bool>()), 0..40);
    let base = prop_oneof![Just(0u64), Just((1 << 32) - 2500), 0..(1u64 << 40)];
    let flags = prop::collection::vec((any::<bool>(), any::<bool>()), 6);
    (base, extra, flags).prop_flat_map(|(base, extra, flags)| {
        // Six segments covering the stream, so it can always be drained entirely.
        let mut v: Vec<Arrival> = (0..6)
            .map(|i| Arrival { start: i * 1000, len: 1000, trim: flags[i as usize].0, drain: flags[i as usize].1 })
            .collect();
        v.extend(extra.into_iter().map(|(start, len, trim, drain)| Arrival {
            start,
            len: len.min(W - start),
            trim,
            drain,
        }));
        (Just(base), Just(v).prop_shuffle())
    })
}

proptest! {
    #[test]
    #[cfg_attr(miri, ignore = "a byte-by-byte reference model: minutes a case under Miri; the queue has no unsafe")]
    fn random_arrivals_reassemble_the_stream((base, arrivals) in arrivals()) {
        let p = pool(64);
        let mut q = OutOfOrderQueue::new();
        let mut rcv_nxt = base;
        let mut out: Vec<u8> = Vec::new();
        // What the queue holds, relative to base.
        let mut held = vec![false; W as usize];
        let mut inserted = 0;
        let mut drain_all = |q: &mut OutOfOrderQueue, rcv_nxt: &mut u64, held: &mut [bool]| {
            while let Some((pos, b)) = q.pop_ready(*rcv_nxt) {
                assert_eq!(pos, *rcv_nxt);
                out.extend_from_slice(b.data());
                *rcv_nxt += b.len() as u64;
            }
            held[..(*rcv_nxt - base) as usize].fill(false);
        };
        for a in &arrivals {
            let (mut pos, mut len) = (base + a.start, a.len);
            let mut buf = seg(&p, pos, len);
            if a.trim && pos < rcv_nxt {
                let skip = (rcv_nxt - pos).min(len);
                buf.trim_front(skip as usize).unwrap();
                pos += skip;
                len -= skip;
            }
            let (lo, hi) = ((pos - base) as usize, (pos - base + len) as usize);
            let was = held[lo..hi].to_vec();
            inserted += len;
            let r = q.insert(pos, buf);
            check(&q);
            let new: Vec<usize> = (lo..hi).filter(|&i| !was[i - lo]).collect();
            prop_assert_eq!(r.new_bytes(), new.len());
            prop_assert_eq!(r.duplicate_bytes(), (hi - lo) - new.len());
            let rel = |(s, e): (u64, u64)| ((s - base) as usize, (e - base) as usize);
            match r {
                Insert::Empty => prop_assert_eq!(len, 0),
                Insert::New { start, end, .. } | Insert::Duplicate { start, end, .. } => {
                    prop_assert_eq!((start, end), (pos, pos + len));
                    prop_assert!(new.is_empty() || new.len() == hi - lo);
                }
                Insert::PartialDuplicate { new: n, dup, .. } => {
                    prop_assert_eq!(rel(n), (new[0], new[new.len() - 1] + 1));
                    // The first maximal run of held bytes inside the segment.
                    let d0 = lo + was.iter().position(|&h| h).unwrap();
                    let d1 = (d0..hi).find(|&i| !was[i - lo]).unwrap_or(hi);
                    prop_assert_eq!(rel(dup), (d0, d1));
                }
            }
            held[lo..hi].fill(true);
            if let Some(block) = r.block() {
                let (b0, b1) = rel(block);
                prop_assert!(held[b0..b1].iter().all(|&h| h));
                prop_assert!(b0 == 0 || !held[b0 - 1]);
                prop_assert!(b1 == W as usize || !held[b1]);
            }
            if a.drain {
                drain_all(&mut q, &mut rcv_nxt, &mut held);
                check(&q);
            }
            // The SACK blocks: held, maximal, above rcv_nxt, disjoint, the newest first.
            let mut blocks = [(0, 0); MAX_SACK_BLOCKS];
            let n = q.sack_blocks(rcv_nxt, 4, &mut blocks);
            prop_assert!(n <= q.blocks());
            for (i, &(s, e)) in blocks[..n].iter().enumerate() {
                prop_assert!(s >= rcv_nxt && s < e);
                let (s, e) = rel((s, e));
                prop_assert!(held[s..e].iter().all(|&h| h));
                prop_assert!(s == 0 || !held[s - 1] || s == (rcv_nxt - base) as usize);
                prop_assert!(e == W as usize || !held[e]);
                for &(s2, e2) in &blocks[..i] {
                    let (s2, e2) = rel((s2, e2));
                    prop_assert!(e <= s2 || e2 <= s);
                }
            }
            if len > 0 && pos + len > rcv_nxt {
                prop_assert!(n >= 1);
                prop_assert!(blocks[0].0 <= pos.max(rcv_nxt) && pos + len <= blocks[0].1);
            }
        }
        drain_all(&mut q, &mut rcv_nxt, &mut held);
        prop_assert_eq!(rcv_nxt, base + W);
        prop_assert!(q.is_empty());
        prop_assert_eq!(out.len(), W as usize);
        for (i, &byte) in out.iter().enumerate() {
            prop_assert_eq!(byte, pat(base + i as u64), "byte at {}", base + i as u64);
        }
        let s = q.stats();
        prop_assert_eq!(s.stale_bytes + W + s.duplicate_bytes, inserted, "every byte inserted is delivered or counted");
        q.clear();
        prop_assert_eq!(p.available(), p.capacity());
    }
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Op {
    /// Insert `[rcv_nxt + at, + len)`; `at` may lie below `rcv_nxt` (it is an offset from
    /// `rcv_nxt - 500`) to exercise stale data.
    Insert {
        at: u64,
        len: u64,
    },
    /// Drain everything ready.
    Drain,
    /// Ask for the SACK blocks with this limit.
    Sack {
        max: usize,
    },
    Clear,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        8 => (0..4000u64, 0..=300u64).prop_map(|(at, len)| Op::Insert { at, len }),
        2 => Just(Op::Drain),
        3 => (0..=5usize).prop_map(|max| Op::Sack { max }),
        1 => Just(Op::Clear),
    ];
    prop::collection::vec(op, 0..200)
}

proptest! {
    /// The queue against a naive reference: the held bytes as a set, and the blocks as an
    /// unsorted list of `(start, end, stamp)` rebuilt by linear scans. After every step the
    /// counts, the bounds and the exact SACK blocks (RFC 2018 §4 order: by the arrival of
    /// the newest segment into the block) agree.
    #[test]
    #[cfg_attr(miri, ignore = "a byte-by-byte reference model: minutes a case under Miri; the queue has no unsafe")]
    fn random_operations_match_a_reference_model(ops in ops()) {
        const SPAN: usize = 1 << 14;
        let p = pool(256);
        let mut q = OutOfOrderQueue::new();
        let mut rcv_nxt = 1000u64;
        let mut held = vec![false; SPAN];
        let mut blocks: Vec<(u64, u64, u64)> = Vec::new();
        let mut stamp = 0u64;
        for op in ops {
            match op {
                Op::Insert { at, len } => {
                    if p.available() == 0 {
                        continue;
                    }
                    let pos = rcv_nxt - 500 + at;
                    let (lo, hi) = (pos as usize, (pos + len) as usize);
                    if hi > SPAN {
                        continue;
                    }
                    let new = held[lo..hi].iter().filter(|&&h| !h).count();
                    let r = q.insert(pos, seg(&p, pos, len));
                    prop_assert_eq!((r.new_bytes(), r.duplicate_bytes()), (new, (hi - lo) - new));
                    if len == 0 {
                        prop_assert_eq!(r, Insert::Empty);
                        continue;
                    }
                    held[lo..hi].fill(true);
                    // Merge every block overlapping or touching [pos, pos + len).
                    let (mut s, mut e) = (pos, pos + len);
                    blocks.retain(|&(bs, be, _)| {
                        let joins = bs <= e && be >= s;
                        if joins {
                            s = s.min(bs);
                            e = e.max(be);
                        }
                        !joins
                    });
                    stamp += 1;
                    blocks.push((s, e, stamp));
                    prop_assert_eq!(r.block(), Some((s, e)));
                }
                Op::Drain => {
                    while let Some((pos, b)) = q.pop_ready(rcv_nxt) {
                        prop_assert_eq!(pos, rcv_nxt);
                        prop_assert!(held[pos as usize]);
                        rcv_nxt += b.len() as u64;
                    }
                    held[..rcv_nxt as usize].fill(false);
                    // After a full drain, no held segment starts at or below rcv_nxt.
                    blocks.retain(|&(s, _, _)| s > rcv_nxt);
                }
                Op::Sack { max } => {
                    let mut order = blocks.clone();
                    order.sort_by_key(|&(_, _, t)| std::cmp::Reverse(t));
                    let want: Vec<(u64, u64)> = order
                        .iter()
                        .filter(|&&(_, e, _)| e > rcv_nxt)
                        .map(|&(s, e, _)| (s.max(rcv_nxt), e))
                        .take(max.min(MAX_SACK_BLOCKS))
                        .collect();
                    prop_assert_eq!(sacks(&q, rcv_nxt, max), want);
                }
                Op::Clear => {
                    q.clear();
                    held.fill(false);
                    blocks.clear();
                }
            }
            check(&q);
            prop_assert_eq!(q.bytes(), held.iter().filter(|&&h| h).count());
            prop_assert_eq!(q.blocks(), blocks.len());
            prop_assert_eq!(q.is_empty(), blocks.is_empty());
            prop_assert_eq!(q.lowest(), blocks.iter().map(|b| b.0).min());
            prop_assert_eq!(q.highest(), blocks.iter().map(|b| b.1).max());
        }
        q.clear();
        prop_assert_eq!(p.available(), p.capacity());
    }
}
