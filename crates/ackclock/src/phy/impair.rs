//! Impairment around any device: delay, loss, reordering and duplication of the frames it
//! transmits and receives, drawn from a seed. With a TAP device this stands in for netem,
//! which this kernel lacks: interop tests can then see loss and delay against Linux.
//!
//! The loss and reordering models ([`Loss`], [`Reorder`]) live here, below the simulator,
//! which draws from the same ones on its links. Frames that are delayed wait in a bounded queue ordered by due time; [`Device::poll_at`] reports the
//! earliest, so a caller's loop must also wake for it (take the minimum with the stack's
//! `poll_at`). Nothing is copied: a duplicate is a shared handle.

use super::gso::{GsoStats, Segmenter};
use super::{Batch, Capabilities, Device, DeviceStats};
use crate::buf::{Flags, PBuf};
use crate::rng::Rng;
use crate::time::{Duration, Instant};
use core::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Random loss.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Loss {
    /// No loss.
    #[default]
    None,
    /// Each frame is lost independently with this probability.
    Bernoulli(f64),
    /// Bursty loss: a two-state Markov chain. A frame is lost with `loss_good` or `loss_bad`
    /// depending on the current state; then the chain moves good→bad with probability `p`,
    /// bad→good with `r`. The long-run loss rate is
    /// `(r * loss_good + p * loss_bad) / (p + r)`; bursts last `1 / r` frames on average.
    /// The chain moves per frame, not per unit of time (as netem's `gemodel`), so a sparse
    /// flow, such as a sender backing off its retransmission timer, stays in a bad state
    /// for as many of its own frames as a dense one.
    GilbertElliott {
        /// Chance (0 to 1) of moving from the good state to the bad one after a frame.
        p: f64,
        /// Chance (0 to 1) of moving from the bad state to the good one after a frame.
        r: f64,
        /// Chance (0 to 1) that a frame is lost in the good state.
        loss_good: f64,
        /// Chance (0 to 1) that a frame is lost in the bad state.
        loss_bad: f64,
    },
}

impl Loss {
    /// Draw whether the next frame is lost; `bad` is the Gilbert-Elliott chain's state,
    /// which moves after the draw.
    pub fn draw(&self, rng: &mut Rng, bad: &mut bool) -> bool {
        match *self {
            Loss::None => false,
            Loss::Bernoulli(p) => p > 0.0 && rng.chance(p),
            Loss::GilbertElliott { p, r, loss_good, loss_bad } => {
                let lost = rng.chance(if *bad { loss_bad } else { loss_good });
                *bad = if *bad { !rng.chance(r) } else { rng.chance(p) };
                lost
            }
        }
    }

    /// The long-run fraction of frames lost.
    pub fn mean_rate(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Bernoulli(p) => p,
            Loss::GilbertElliott { p, r, loss_good, loss_bad } => {
                if p + r == 0.0 {
                    loss_good
                } else {
                    (r * loss_good + p * loss_bad) / (p + r)
                }
            }
        }
    }
}

/// Reordering: a frame is held back by `extra_delay` with `probability`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reorder {
    /// Chance (0 to 1) that a frame is held back.
    pub probability: f64,
    /// How much longer than the other frames a held-back frame is delayed.
    pub extra_delay: Duration,
}

/// What happens to frames going one way.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairment {
    /// Added to every frame.
    pub delay: Duration,
    /// Which frames are lost.
    pub loss: Loss,
    /// Deliver a frame twice with this probability.
    pub duplicate: f64,
    /// Whether and how frames are reordered; `None` keeps their order.
    pub reorder: Option<Reorder>,
}

impl Impairment {
    fn is_clean(&self) -> bool {
        self.delay.is_zero() && self.loss == Loss::None && self.duplicate == 0.0 && self.reorder.is_none()
    }
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImpairStats {
    /// Frames released to the other side after their delay (duplicates included).
    pub passed: u64,
    /// Frames dropped by the loss model.
    pub lost: u64,
    /// Frames delivered twice.
    pub duplicated: u64,
    /// Frames held back by `extra_delay` to reorder them.
    pub reordered: u64,
    /// Dropped because the delay queue was full.
    pub overflow: u64,
}

#[derive(Debug)]
struct Held {
    due: Instant,
    seq: u64,
    frame: PBuf,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.due, self.seq).cmp(&(o.due, o.seq))
    }
}

#[derive(Debug)]
struct Way {
    cfg: Impairment,
    rng: Rng,
    bad: bool,
    held: BinaryHeap<Reverse<Held>>,
    seq: u64,
    stats: ImpairStats,
}

impl Way {
    fn new(cfg: Impairment, rng: Rng, capacity: usize) -> Way {
        Way { cfg, rng, bad: false, held: BinaryHeap::with_capacity(capacity), seq: 0, stats: ImpairStats::default() }
    }

    fn lose(&mut self) -> bool {
        self.cfg.loss.draw(&mut self.rng, &mut self.bad)
    }

    /// Apply the impairment to `frame`, holding what is delayed; frames due at once go to
    /// `out` (which has room: callers size it).
    fn admit(&mut self, now: Instant, frame: PBuf, capacity: usize) {
        if self.lose() {
            self.stats.lost += 1;
            return;
        }
        let dup = self.cfg.duplicate > 0.0 && self.rng.chance(self.cfg.duplicate);
        let mut delay = self.cfg.delay;
        if let Some(r) = self.cfg.reorder {
            if r.probability > 0.0 && self.rng.chance(r.probability) {
                delay += r.extra_delay;
                self.stats.reordered += 1;
            }
        }
        if dup {
            self.stats.duplicated += 1;
            let copy = frame.share();
            self.hold(now + delay, copy, capacity);
        }
        self.hold(now + delay, frame, capacity);
    }

    fn hold(&mut self, due: Instant, frame: PBuf, capacity: usize) {
        if self.held.len() >= capacity {
            self.stats.overflow += 1;
            return;
        }
        self.seq += 1;
        self.held.push(Reverse(Held { due, seq: self.seq, frame }));
    }

    /// Move frames due by `now` into `out` while it has room.
    fn release(&mut self, now: Instant, out: &mut Batch) -> usize {
        let mut n = 0;
        while !out.is_full() {
            match self.held.peek() {
                Some(Reverse(h)) if h.due <= now => {}
                _ => break,
            }
            if let Some(Reverse(h)) = self.held.pop() {
                self.stats.passed += 1;
                let _ = out.push(h.frame);
                n += 1;
            }
        }
        n
    }

    fn next_due(&self) -> Option<Instant> {
        self.held.peek().map(|Reverse(h)| h.due)
    }
}

/// A device with impaired directions.
#[derive(Debug)]
pub struct Impaired<D: Device> {
    inner: D,
    tx: Way,
    rx: Way,
    capacity: usize,
    scratch: Batch,
    /// Cuts offload frames into wire segments before they are impaired (see
    /// [`cut_offload`](Self::cut_offload)).
    cutter: Option<Segmenter>,
}

impl<D: Device> Impaired<D> {
    /// Wrap `inner`: `tx` applies to frames it transmits, `rx` to frames it receives. At most
    /// `capacity` frames wait per direction (more are dropped and counted).
    pub fn new(inner: D, tx: Impairment, rx: Impairment, seed: u64, capacity: usize) -> Impaired<D> {
        let capacity = capacity.max(1);
        Impaired {
            inner,
            tx: Way::new(tx, Rng::derive(seed, 10), capacity),
            rx: Way::new(rx, Rng::derive(seed, 11), capacity),
            capacity,
            scratch: Batch::with_capacity(256),
            cutter: None,
        }
    }

    /// Cut frames that carry many segments (GSO_TCPV4, both ways: the stack's TSO units and a
    /// TAP's coalesced receives) into wire segments before impairing them, so that loss,
    /// delay and reordering act per segment, as on a wire, and a 2% loss is not a 2% chance
    /// of losing 45 segments at once. The pieces come from a pool of `buffers` frames of
    /// the device's MTU; impaired frames wait in it, so size it for the delay queue.
    pub fn cut_offload(mut self, buffers: usize) -> Impaired<D> {
        self.cutter = Some(Segmenter::for_link(&self.inner.capabilities(), buffers));
        self
    }

    /// What cutting did (zero without [`cut_offload`](Self::cut_offload)).
    pub fn cut_stats(&self) -> GsoStats {
        self.cutter.as_ref().map(Segmenter::stats).unwrap_or_default()
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Counters of the transmit and receive directions.
    pub fn impair_stats(&self) -> (ImpairStats, ImpairStats) {
        (self.tx.stats, self.rx.stats)
    }
}

/// Admit a frame to one direction, cut into segments first if there is a cutter.
fn admit(way: &mut Way, cutter: Option<&mut Segmenter>, now: Instant, frame: PBuf, capacity: usize) {
    match cutter {
        Some(c) if frame.meta.flags.contains(Flags::GSO_TCPV4) => c.cut(frame, |p| way.admit(now, p, capacity)),
        _ => way.admit(now, frame, capacity),
    }
}

impl<D: Device> Device for Impaired<D> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, now: Instant, rx: &mut Batch) -> usize {
        if self.rx.cfg.is_clean() && self.rx.held.is_empty() {
            return self.inner.receive(now, rx);
        }
        self.inner.receive(now, &mut self.scratch);
        while let Some(f) = self.scratch.pop() {
            admit(&mut self.rx, self.cutter.as_mut(), now, f, self.capacity);
        }
        self.rx.release(now, rx)
    }

    fn transmit(&mut self, now: Instant, tx: &mut Batch) -> usize {
        if self.tx.cfg.is_clean() && self.tx.held.is_empty() {
            return self.inner.transmit(now, tx);
        }
        while let Some(f) = tx.pop() {
            admit(&mut self.tx, self.cutter.as_mut(), now, f, self.capacity);
        }
        let mut sent = 0;
        loop {
            let n = self.tx.release(now, &mut self.scratch);
            if n == 0 && self.scratch.is_empty() {
                break;
            }
            sent += self.inner.transmit(now, &mut self.scratch);
            if !self.scratch.is_empty() {
                // The device pushed back: keep the rest for the next call, in order.
                while let Some(f) = self.scratch.pop() {
                    self.tx.hold(now, f, self.capacity);
                }
                break;
            }
        }
        sent
    }

    fn poll_at(&self) -> Option<Instant> {
        [self.inner.poll_at(), self.tx.next_due(), self.rx.next_due()].into_iter().flatten().min()
    }

    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};
    use crate::phy::{pipe, PipeConfig};

    fn frames(pool: &Pool, n: u8) -> Batch {
        let mut b = Batch::with_capacity(n as usize);
        for i in 0..n {
            let mut f = pool.alloc().unwrap();
            f.append(1).unwrap()[0] = i;
            b.push(f).unwrap();
        }
        b
    }

    fn drain(dev: &mut impl Device, now: Instant) -> Vec<u8> {
        let mut rx = Batch::with_capacity(512);
        dev.receive(now, &mut rx);
        rx.iter().map(|f| f.data()[0]).collect()
    }

    #[test]
    fn delay_holds_frames_until_due() {
        let pool = Pool::new(PoolConfig { buffers: 64, ..Default::default() }).unwrap();
        let (a, mut b) = pipe(PipeConfig::default());
        let imp = Impairment { delay: Duration::from_millis(20), ..Default::default() };
        let mut a = Impaired::new(a, imp, Impairment::default(), 1, 64);
        let t0 = Instant::from_secs(1);
        a.transmit(t0, &mut frames(&pool, 3));
        assert_eq!(a.poll_at(), Some(t0 + Duration::from_millis(20)));
        assert!(drain(&mut b, t0).is_empty());
        a.transmit(t0 + Duration::from_millis(19), &mut Batch::with_capacity(1));
        assert!(drain(&mut b, t0).is_empty());
        a.transmit(t0 + Duration::from_millis(20), &mut Batch::with_capacity(1));
        assert_eq!(drain(&mut b, t0), vec![0, 1, 2], "in order after exactly the delay");
        assert_eq!(a.poll_at(), None);
    }

    #[test]
    fn loss_duplication_and_reordering_are_seeded() {
        let run = |seed| {
            let pool = Pool::new(PoolConfig { buffers: 512, ..Default::default() }).unwrap();
            let (a, mut b) = pipe(PipeConfig::default());
            let imp = Impairment {
                delay: Duration::from_millis(1),
                loss: Loss::Bernoulli(0.1),
                duplicate: 0.05,
                reorder: Some(Reorder { probability: 0.1, extra_delay: Duration::from_millis(5) }),
            };
            let mut a = Impaired::new(a, imp, Impairment::default(), seed, 512);
            let t0 = Instant::from_secs(1);
            a.transmit(t0, &mut frames(&pool, 200));
            a.transmit(t0 + Duration::from_millis(10), &mut Batch::with_capacity(1));
            (drain(&mut b, t0), a.impair_stats().0)
        };
        let (x, sx) = run(7);
        let (y, _) = run(7);
        let (z, _) = run(8);
        assert_eq!(x, y, "same seed, same frames in the same order");
        assert_ne!(x, z);
        assert!(sx.lost > 5 && sx.lost < 40, "{sx:?}");
        assert!(sx.duplicated > 0 && sx.reordered > 0);
        assert_eq!(x.len() as u64, 200 - sx.lost + sx.duplicated);
        assert!(x.windows(2).any(|w| w[0] > w[1]), "some frames overtaken");
    }

    #[test]
    fn clean_directions_pass_straight_through() {
        let pool = Pool::new(PoolConfig { buffers: 8, ..Default::default() }).unwrap();
        let (a, mut b) = pipe(PipeConfig::default());
        let mut a = Impaired::new(a, Impairment::default(), Impairment::default(), 1, 8);
        a.transmit(Instant::ZERO, &mut frames(&pool, 4));
        assert_eq!(drain(&mut b, Instant::ZERO), vec![0, 1, 2, 3]);
        let rx_side = Impairment { loss: Loss::Bernoulli(1.0), ..Default::default() };
        let (c, mut d) = pipe(PipeConfig::default());
        let mut c = Impaired::new(c, Impairment::default(), rx_side, 1, 8);
        d.transmit(Instant::ZERO, &mut frames(&pool, 4));
        assert!(drain(&mut c, Instant::ZERO).is_empty(), "receive side impaired: all lost");
        assert_eq!(c.impair_stats().1.lost, 4);
    }
}
