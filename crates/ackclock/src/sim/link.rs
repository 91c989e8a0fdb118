//! A simulated Ethernet link between two ends, `A` and `B`, on virtual time.
//!
//! # What is charged
//!
//! A frame occupies the wire for its Ethernet on-wire size: the frame as the stack built it
//! (header and payload, no FCS), padded to the 60-byte minimum, plus 4 bytes of FCS, 8 of
//! preamble and start delimiter, and 12 of inter-frame gap ([`wire_bytes`]). A 1514-byte
//! frame costs 1538 byte-times, a bare ACK 84. Serialization takes `wire_bytes * 8 / rate`;
//! sub-nanosecond remainders carry over between back-to-back frames, so a saturated link
//! runs at exactly its rate. A frame arrives `delay` after its last bit left.
//!
//! # Queues and the medium
//!
//! Each end has a drop-tail queue of frames waiting for the medium, bounded in frames or in
//! bytes (of the frames as built, [`QueueLimit`]); the frame being serialized has left the
//! queue (as ns-2's DropTail). A frame that does not fit is dropped and counted.
//!
//! - [`Duplex::Full`]: each direction is its own medium (a point-to-point cable or switched
//!   port); frames of one direction queue behind each other only.
//! - [`Duplex::Half`]: one shared medium for both directions, as on 10BASE2/10BASE-T with a
//!   hub. Carrier sense is perfect and there are no collisions (an idealised CSMA: no
//!   backoff, no capture effect). An idle medium takes the first frame handed to it. When a
//!   frame ends and both ends have frames waiting, the ends take turns (the one that did not
//!   send last goes next), so a receiver's ACK waits for at most one data frame. A frame
//!   handed over at the very instant the medium frees, after the link already chose, waits
//!   for the next turn. Propagation delay does not hold the medium.
//!
//! # Impairments
//!
//! Drawn per frame as its serialization starts (it used the wire either way), from the
//! direction's own [`Rng`] stream, in this order: loss ([`Loss`]: Bernoulli or
//! Gilbert-Elliott), corruption, duplication, reordering. A draw is made only for an
//! impairment that is switched on, so enabling one on a direction never changes another
//! direction's run.
//! - Lost frames never arrive.
//! - A corrupted frame arrives as a copy, in a buffer of the link's own pool, with one
//!   uniformly chosen bit flipped; the sender's buffer (often shared with its retransmission
//!   queue) is never written. The link adds a pool of copy buffers whenever all are taken
//!   (a receiver may hold corrupted frames that passed its checks; corruption of the source
//!   MAC or of padding is invisible to IP and TCP).
//! - A duplicate is a second handle to the same bytes ([`PBuf::share`]), arriving right
//!   after the original; it does not occupy the wire (a misbehaving switch after it).
//! - A reordered frame arrives `extra_delay` late, so frames behind it overtake it.
//!
//! Other frames cross by handle, without a copy. Every delivered handle has its metadata
//! reset: only the bytes cross a wire, never a cached checksum.

use crate::buf::{Meta, PBuf, Pool, PoolConfig, DEFAULT_HEADROOM};
pub use crate::phy::impair::{Loss, Reorder};
use crate::phy::{Batch, Capabilities, Device, DeviceStats};
use crate::rng::Rng;
use crate::time::{Duration, Instant};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Bytes an Ethernet frame of `len` bytes (without FCS) occupies on the wire: padded to the
/// 64-byte minimum with its FCS, plus preamble/SFD (8) and inter-frame gap (12).
pub const fn wire_bytes(len: usize) -> usize {
    let with_fcs = len + 4;
    (if with_fcs < 64 { 64 } else { with_fcs }) + 8 + 12
}

/// Serialization time of `bytes` on-wire bytes at `rate_bps`, rounded down to a nanosecond.
pub fn serialization(bytes: usize, rate_bps: u64) -> Duration {
    Duration::from_nanos((bytes as u128 * 8 * 1_000_000_000 / rate_bps.max(1) as u128) as u64)
}

/// One end of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The end whose frames travel on [`LinkConfig::a_to_b`].
    A,
    /// The end whose frames travel on [`LinkConfig::b_to_a`].
    B,
}

impl Side {
    /// The end at the other side of the link.
    pub const fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// How much a queue holds before it drops (drop-tail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// Frames waiting, not counting the one being serialized.
    Packets(usize),
    /// Bytes of the waiting frames (as built, without wire overhead).
    Bytes(usize),
}

/// What goes wrong on one direction of a link. All probabilities are per frame.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairments {
    /// Which frames are lost on the medium.
    pub loss: Loss,
    /// Flip one random bit of the frame (in a copy).
    pub corrupt: f64,
    /// Deliver the frame twice.
    pub duplicate: f64,
    /// Whether and how frames are reordered; `None` keeps their order.
    pub reorder: Option<Reorder>,
}

/// One direction of a link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Channel {
    /// Bits per second; must not be zero.
    pub rate_bps: u64,
    /// Propagation delay.
    pub delay: Duration,
    /// The sending end's queue.
    pub queue: QueueLimit,
    /// What goes wrong on this direction.
    pub impairments: Impairments,
}

impl Channel {
    /// A clean channel.
    pub const fn new(rate_bps: u64, delay: Duration, queue: QueueLimit) -> Channel {
        Channel {
            rate_bps,
            delay,
            queue,
            impairments: Impairments { loss: Loss::None, corrupt: 0.0, duplicate: 0.0, reorder: None },
        }
    }
}

/// Whether the two directions share the medium.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplex {
    /// Each direction has its own medium.
    Full,
    /// One medium for both directions (both channels must have the same rate).
    Half,
}

/// A link: a channel each way, and whether they share the medium.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// The IP MTU both ends report in their [`Capabilities`].
    pub mtu: usize,
    /// Whether the two directions share one medium.
    pub duplex: Duplex,
    /// Frames sent by end A.
    pub a_to_b: Channel,
    /// Frames sent by end B.
    pub b_to_a: Channel,
}

/// A host's transmit queue on a LAN (Linux `txqueuelen`).
const LAN_QUEUE: QueueLimit = QueueLimit::Packets(1000);
/// Propagation delay of the LAN profiles: some 2 km of cable and a switch or hub.
const LAN_DELAY: Duration = Duration::from_micros(10);

impl LinkConfig {
    /// Both directions alike.
    pub const fn symmetric(channel: Channel, duplex: Duplex, mtu: usize) -> LinkConfig {
        LinkConfig { mtu, duplex, a_to_b: channel, b_to_a: channel }
    }

    /// Classic 10 Mb/s Ethernet: one half-duplex medium shared by both directions.
    pub const fn ethernet10() -> LinkConfig {
        LinkConfig::symmetric(Channel::new(10_000_000, LAN_DELAY, LAN_QUEUE), Duplex::Half, 1500)
    }

    /// 100 Mb/s full-duplex Ethernet.
    pub const fn ethernet100() -> LinkConfig {
        LinkConfig::symmetric(Channel::new(100_000_000, LAN_DELAY, LAN_QUEUE), Duplex::Full, 1500)
    }

    /// 1 Gb/s full-duplex Ethernet.
    pub const fn gigabit() -> LinkConfig {
        LinkConfig::symmetric(Channel::new(1_000_000_000, LAN_DELAY, LAN_QUEUE), Duplex::Full, 1500)
    }

    /// 10 Gb/s full-duplex Ethernet.
    pub const fn ten_gig() -> LinkConfig {
        LinkConfig::symmetric(Channel::new(10_000_000_000, LAN_DELAY, LAN_QUEUE), Duplex::Full, 1500)
    }

    /// A wide-area path: full duplex, `rate_bps` each way, one-way `delay`, and a drop-tail
    /// queue of one bandwidth-delay product (`rate * 2 * delay`), at least 64 full frames.
    pub fn wan(rate_bps: u64, delay: Duration) -> LinkConfig {
        let bdp = (rate_bps as u128 * 2 * delay.as_nanos() / 8 / 1_000_000_000) as usize;
        let queue = QueueLimit::Bytes(bdp.max(64 * 1514));
        LinkConfig::symmetric(Channel::new(rate_bps, delay, queue), Duplex::Full, 1500)
    }

    /// The same impairments on both directions.
    pub fn with_impairments(mut self, impairments: Impairments) -> LinkConfig {
        self.a_to_b.impairments = impairments;
        self.b_to_a.impairments = impairments;
        self
    }

    /// The same loss model on both directions.
    pub fn with_loss(mut self, loss: Loss) -> LinkConfig {
        self.a_to_b.impairments.loss = loss;
        self.b_to_a.impairments.loss = loss;
        self
    }

    /// The same queue limit at both ends.
    pub fn with_queue(mut self, queue: QueueLimit) -> LinkConfig {
        self.a_to_b.queue = queue;
        self.b_to_a.queue = queue;
        self
    }

    /// The same propagation delay both ways.
    pub fn with_delay(mut self, delay: Duration) -> LinkConfig {
        self.a_to_b.delay = delay;
        self.b_to_a.delay = delay;
        self
    }

    /// The channel carrying frames sent by `from`.
    pub fn channel(&self, from: Side) -> &Channel {
        match from {
            Side::A => &self.a_to_b,
            Side::B => &self.b_to_a,
        }
    }

    /// The channel carrying frames sent by `from`, mutably.
    pub fn channel_mut(&mut self, from: Side) -> &mut Channel {
        match from {
            Side::A => &mut self.a_to_b,
            Side::B => &mut self.b_to_a,
        }
    }

    /// Why this configuration cannot be simulated, if it cannot.
    pub fn validate(&self) -> Result<(), &'static str> {
        let prob = |p: f64| (0.0..=1.0).contains(&p);
        for c in [&self.a_to_b, &self.b_to_a] {
            if c.rate_bps == 0 {
                return Err("rate_bps must not be zero");
            }
            if matches!(c.queue, QueueLimit::Packets(0) | QueueLimit::Bytes(0)) {
                return Err("a queue must hold at least one frame");
            }
            let i = &c.impairments;
            let loss_ok = match i.loss {
                Loss::None => true,
                Loss::Bernoulli(p) => prob(p),
                Loss::GilbertElliott { p, r, loss_good, loss_bad } => {
                    prob(p) && prob(r) && prob(loss_good) && prob(loss_bad)
                }
            };
            if !loss_ok || !prob(i.corrupt) || !prob(i.duplicate) || !i.reorder.is_none_or(|r| prob(r.probability)) {
                return Err("probabilities must lie in [0, 1]");
            }
        }
        if self.duplex == Duplex::Half && self.a_to_b.rate_bps != self.b_to_a.rate_bps {
            return Err("a half-duplex medium has one rate");
        }
        if self.mtu < 68 {
            return Err("the IPv4 MTU is at least 68");
        }
        Ok(())
    }
}

/// Counters of one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Frames (and their bytes) the sending end accepted into its queue.
    pub enqueued: u64,
    /// Bytes of the frames counted by `enqueued`.
    pub enqueued_bytes: u64,
    /// Frames dropped because the queue was full.
    pub queue_drops: u64,
    /// Frames serialized onto the medium (lost ones included).
    pub transmitted: u64,
    /// Frames (and bytes) handed to the receiving end, duplicates included.
    pub delivered: u64,
    /// Bytes of the frames counted by `delivered`.
    pub delivered_bytes: u64,
    /// Frames lost after serializing them onto the medium.
    pub lost: u64,
    /// Frames delivered with one bit flipped.
    pub corrupted: u64,
    /// Frames delivered twice.
    pub duplicated: u64,
    /// Frames delivered `extra_delay` late, so that frames behind them overtake them.
    pub reordered: u64,
    /// Frames to corrupt that were dropped instead because no copy buffer could be made.
    pub copy_failures: u64,
    /// Time this direction's frames held the medium.
    pub busy: Duration,
    /// Largest queue seen, in frames and in bytes.
    pub max_queue: usize,
    /// Largest queue seen, in bytes.
    pub max_queue_bytes: usize,
}

#[derive(Debug)]
struct Waiting {
    frame: PBuf,
    enqueued: Instant,
}

/// A frame on its way: serializing or propagating.
#[derive(Debug)]
struct Flight {
    arrival: Instant,
    /// Tie-break: frames due at the same instant arrive in the order they were sent.
    seq: u64,
    frame: PBuf,
}

impl PartialEq for Flight {
    fn eq(&self, other: &Self) -> bool {
        (self.arrival, self.seq) == (other.arrival, other.seq)
    }
}
impl Eq for Flight {}
impl PartialOrd for Flight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Flight {
    /// Reversed, so that `BinaryHeap` pops the earliest arrival first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.arrival, other.seq).cmp(&(self.arrival, self.seq))
    }
}

/// One direction's state.
#[derive(Debug)]
struct Direction {
    channel: Channel,
    queue: VecDeque<Waiting>,
    queued_bytes: usize,
    flight: BinaryHeap<Flight>,
    rng: Rng,
    /// Gilbert-Elliott state.
    bad: bool,
    stats: LinkStats,
}

impl Direction {
    fn new(channel: Channel, rng: Rng) -> Direction {
        Direction {
            channel,
            queue: VecDeque::new(),
            queued_bytes: 0,
            flight: BinaryHeap::new(),
            rng,
            bad: false,
            stats: LinkStats::default(),
        }
    }

    fn lose(&mut self) -> bool {
        self.channel.impairments.loss.draw(&mut self.rng, &mut self.bad)
    }

    fn draw(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.chance(p)
    }
}

/// A medium: when it falls idle and who sent last.
#[derive(Debug, Clone, Copy, Default)]
struct Medium {
    free_at: Instant,
    /// Sub-nanosecond part of `free_at`, in units of 1/rate ns.
    rem: u64,
    last: usize,
}

/// A simulated link; see the [module docs](self). Use [`Link::end`] as a [`Device`].
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    dirs: [Direction; 2],
    /// Full duplex: one medium per direction. Half duplex: `media[0]` only.
    media: [Medium; 2],
    seq: u64,
    /// Buffers for corrupted copies: a pool is added whenever all are taken.
    copies: Vec<Pool>,
}

/// Buffers per pool for corrupted copies.
const COPY_BUFFERS: usize = 256;

impl Link {
    /// A link whose impairments draw from `seed`.
    ///
    /// # Panics
    /// If the configuration is invalid ([`LinkConfig::validate`]).
    pub fn new(config: LinkConfig, seed: u64) -> Link {
        if let Err(e) = config.validate() {
            panic!("invalid link configuration: {e}");
        }
        Link {
            config,
            dirs: [
                Direction::new(config.a_to_b, Rng::derive(seed, 0)),
                Direction::new(config.b_to_a, Rng::derive(seed, 1)),
            ],
            media: [Medium::default(); 2],
            seq: 0,
            copies: Vec::new(),
        }
    }

    /// The link's configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The end `side` as a device.
    pub fn end(&mut self, side: Side) -> LinkEnd<'_> {
        LinkEnd { link: self, side }
    }

    /// Counters of the direction whose frames `from` sends.
    pub fn stats(&self, from: Side) -> &LinkStats {
        &self.dirs[from.index()].stats
    }

    /// Frames and bytes waiting in `from`'s queue.
    pub fn queued(&self, from: Side) -> (usize, usize) {
        let d = &self.dirs[from.index()];
        (d.queue.len(), d.queued_bytes)
    }

    /// Frames on their way to `to` (serializing or propagating).
    pub fn in_flight(&self, to: Side) -> usize {
        self.dirs[to.other().index()].flight.len()
    }

    /// Hand a frame to `from`'s queue at `now`. Returns false (and counts it) when the
    /// drop-tail queue is full; the frame is dropped.
    pub fn send(&mut self, now: Instant, from: Side, mut frame: PBuf) -> bool {
        self.advance(now);
        let d = &mut self.dirs[from.index()];
        let full = match d.channel.queue {
            QueueLimit::Packets(n) => d.queue.len() >= n,
            QueueLimit::Bytes(n) => d.queued_bytes + frame.len() > n,
        };
        if full {
            d.stats.queue_drops += 1;
            return false;
        }
        frame.meta = Meta::default();
        d.stats.enqueued += 1;
        d.stats.enqueued_bytes += frame.len() as u64;
        d.queued_bytes += frame.len();
        d.queue.push_back(Waiting { frame, enqueued: now });
        d.stats.max_queue = d.stats.max_queue.max(d.queue.len());
        d.stats.max_queue_bytes = d.stats.max_queue_bytes.max(d.queued_bytes);
        // An idle medium takes the frame at once.
        self.advance(now);
        true
    }

    /// Move the frames that have arrived at `to` by `now` into `rx`, earliest first, until
    /// `rx` is full. Returns how many.
    pub fn deliver(&mut self, now: Instant, to: Side, rx: &mut Batch) -> usize {
        self.advance(now);
        let d = &mut self.dirs[to.other().index()];
        let mut n = 0;
        while !rx.is_full() {
            match d.flight.peek() {
                Some(f) if f.arrival <= now => {}
                _ => break,
            }
            let Some(f) = d.flight.pop() else { break };
            d.stats.delivered += 1;
            d.stats.delivered_bytes += f.frame.len() as u64;
            // Cannot fail: checked `is_full` above.
            let _ = rx.push(f.frame);
            n += 1;
        }
        n
    }

    /// Start every transmission due by `now` (inclusive).
    pub fn advance(&mut self, now: Instant) {
        match self.config.duplex {
            Duplex::Full => {
                self.run_medium(0, &[0], now);
                self.run_medium(1, &[1], now);
            }
            Duplex::Half => self.run_medium(0, &[0, 1], now),
        }
    }

    /// The next instant anything happens on the link: a frame arrives or one starts.
    pub fn poll_at(&self) -> Option<Instant> {
        let arrivals = self.dirs.iter().filter_map(|d| d.flight.peek().map(|f| f.arrival));
        let starts = match self.config.duplex {
            Duplex::Full => [self.next_start(0, &[0]), self.next_start(1, &[1])],
            Duplex::Half => [self.next_start(0, &[0, 1]), None],
        };
        arrivals.chain(starts.into_iter().flatten()).min()
    }

    /// When the medium next takes a frame and from which station (direction index).
    fn next_start(&self, m: usize, stations: &[usize]) -> Option<Instant> {
        self.pick(m, stations).map(|(at, _)| at)
    }

    fn pick(&self, m: usize, stations: &[usize]) -> Option<(Instant, usize)> {
        let medium = &self.media[m];
        let mut best: Option<(Instant, usize)> = None;
        for &s in stations {
            let Some(head) = self.dirs[s].queue.front() else { continue };
            let ready = head.enqueued.max(medium.free_at);
            best = match best {
                None => Some((ready, s)),
                Some((at, _)) if ready < at => Some((ready, s)),
                // Both ready at once: take turns.
                Some((at, _)) if ready == at && s != medium.last => Some((ready, s)),
                keep => keep,
            };
        }
        best
    }

    fn run_medium(&mut self, m: usize, stations: &[usize], now: Instant) {
        while let Some((at, s)) = self.pick(m, stations) {
            if at > now {
                break;
            }
            self.start(m, s, at);
        }
    }

    /// Serialize the head frame of direction `s` on medium `m` from `at`.
    fn start(&mut self, m: usize, s: usize, at: Instant) {
        let d = &mut self.dirs[s];
        let Some(Waiting { frame, .. }) = d.queue.pop_front() else { return };
        d.queued_bytes -= frame.len();
        d.stats.transmitted += 1;

        let medium = &mut self.media[m];
        if at > medium.free_at {
            medium.rem = 0; // the medium was idle: no fraction of a nanosecond carries over
        }
        let rate = d.channel.rate_bps as u128;
        let num = medium.rem as u128 + wire_bytes(frame.len()) as u128 * 8 * 1_000_000_000;
        let ser = Duration::from_nanos((num / rate) as u64);
        medium.rem = (num % rate) as u64;
        let end = at + ser;
        medium.free_at = end;
        medium.last = s;
        d.stats.busy += ser;

        if d.lose() {
            d.stats.lost += 1;
            return;
        }
        let imp = d.channel.impairments;
        let mut frame = frame;
        if d.draw(imp.corrupt) {
            let bit = d.rng.below(frame.len().max(1) as u64 * 8);
            match corrupted_copy(&mut self.copies, &frame, bit) {
                Some(copy) => {
                    d.stats.corrupted += 1;
                    frame = copy;
                }
                None => {
                    d.stats.copy_failures += 1;
                    return;
                }
            }
        }
        let arrival = end + d.channel.delay;
        if d.draw(imp.duplicate) {
            d.stats.duplicated += 1;
            d.flight.push(Flight { arrival, seq: self.seq + 1, frame: frame.share() });
        }
        let late = match imp.reorder {
            Some(r) if d.draw(r.probability) => {
                d.stats.reordered += 1;
                r.extra_delay
            }
            _ => Duration::ZERO,
        };
        d.flight.push(Flight { arrival: arrival + late, seq: self.seq, frame });
        self.seq += 2;
    }
}

/// A copy of `frame` in a buffer of one of `pools` (adding a pool when all are taken) with
/// bit `bit` (counted from the first byte's least significant bit) flipped; `None` if the
/// frame does not fit a buffer or no pool can be made.
fn corrupted_copy(pools: &mut Vec<Pool>, frame: &PBuf, bit: u64) -> Option<PBuf> {
    let mut copy = match pools.iter().find_map(|p| p.alloc().ok()) {
        Some(b) => b,
        None => {
            // Room for any frame up to a 9000-byte MTU, the headroom a receiver may expect.
            let size = DEFAULT_HEADROOM + frame.len().max(9018);
            let pool =
                Pool::new(PoolConfig { buffers: COPY_BUFFERS, buffer_size: size, headroom: DEFAULT_HEADROOM }).ok()?;
            let b = pool.alloc().ok()?;
            pools.push(pool);
            b
        }
    };
    let bytes = copy.append(frame.len()).ok()?;
    bytes.copy_from_slice(frame.data());
    if let Some(b) = bytes.get_mut((bit / 8) as usize) {
        *b ^= 1 << (bit % 8);
    }
    Some(copy)
}

/// One end of a [`Link`], borrowed as a [`Device`]. Receive takes frames that have arrived
/// at this end; transmit queues frames at this end (dropping, and counting in
/// [`DeviceStats::tx_dropped`], what the drop-tail queue will not take).
#[derive(Debug)]
pub struct LinkEnd<'a> {
    link: &'a mut Link,
    side: Side,
}

impl LinkEnd<'_> {
    /// Which end of the link this is.
    pub fn side(&self) -> Side {
        self.side
    }
}

impl Device for LinkEnd<'_> {
    fn capabilities(&self) -> Capabilities {
        Capabilities::ethernet(self.link.config.mtu)
    }

    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize {
        self.link.deliver(now, self.side, rx)
    }

    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize {
        let mut n = 0;
        while let Some(frame) = tx.pop() {
            n += usize::from(self.link.send(now, self.side, frame));
        }
        n
    }

    fn poll_at(&self) -> Option<Instant> {
        self.link.poll_at()
    }

    fn stats(&self) -> DeviceStats {
        let out = self.link.stats(self.side);
        let inc = self.link.stats(self.side.other());
        DeviceStats {
            rx_frames: inc.delivered,
            rx_bytes: inc.delivered_bytes,
            tx_frames: out.enqueued,
            tx_bytes: out.enqueued_bytes,
            tx_dropped: out.queue_drops,
            rx_dropped: 0,
        }
    }
}
