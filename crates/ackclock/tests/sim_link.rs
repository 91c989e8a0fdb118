//! The simulated link on its own: timing, queues, the shared medium, impairments.

/// Named `sim` so that `cargo test sim` selects these tests.
mod sim {
    use ackclock::buf::{PBuf, Pool, PoolConfig};
    use ackclock::phy::{Batch, Device};
    use ackclock::sim::link::{serialization, wire_bytes};
    use ackclock::sim::{Channel, Duplex, Impairments, Link, LinkConfig, Loss, QueueLimit, Reorder, Side};
    use ackclock::time::{Duration, Instant};
    use sha2::{Digest, Sha256};

    const T0: Instant = Instant::from_millis(1);

    fn pool(n: usize) -> Pool {
        Pool::new(PoolConfig { buffers: n, ..Default::default() }).unwrap()
    }

    /// A frame of `len` bytes whose first 4 bytes are `id` and the rest a pattern of it.
    fn frame(pool: &Pool, id: u32, len: usize) -> PBuf {
        let mut b = pool.alloc().unwrap();
        let bytes = b.append(len).unwrap();
        for (i, x) in bytes.iter_mut().enumerate() {
            *x = (id as usize).wrapping_mul(31).wrapping_add(i) as u8;
        }
        bytes[..4].copy_from_slice(&id.to_be_bytes());
        b
    }

    fn id_of(f: &PBuf) -> u32 {
        u32::from_be_bytes(f.data()[..4].try_into().unwrap())
    }

    fn send(link: &mut Link, now: Instant, from: Side, frames: impl IntoIterator<Item = PBuf>) -> usize {
        let frames: Vec<PBuf> = frames.into_iter().collect();
        let mut tx = Batch::with_capacity(frames.len().max(1));
        for f in frames {
            tx.push(f).unwrap();
        }
        link.end(from).transmit(now, &mut tx)
    }

    /// Run the link alone to quiescence; every delivered frame with its arrival time and the
    /// side it arrived at.
    fn drain(link: &mut Link) -> Vec<(Instant, Side, PBuf)> {
        let mut out = Vec::new();
        let mut rx = Batch::with_capacity(64);
        while let Some(t) = link.poll_at() {
            for side in [Side::A, Side::B] {
                link.end(side).receive(t, &mut rx);
                while let Some(f) = rx.pop() {
                    out.push((t, side, f));
                }
            }
        }
        out
    }

    fn p2p(rate_bps: u64, delay: Duration, queue: QueueLimit) -> LinkConfig {
        LinkConfig::symmetric(Channel::new(rate_bps, delay, queue), Duplex::Full, 1500)
    }

    #[test]
    fn on_wire_size_is_ethernet_framing() {
        assert_eq!(wire_bytes(1514), 1538, "frame + FCS + preamble + IFG");
        assert_eq!(wire_bytes(60), 84, "minimum frame");
        assert_eq!(wire_bytes(54), 84, "a bare ACK is padded");
        assert_eq!(wire_bytes(0), 84);
        assert_eq!(serialization(1538, 10_000_000), Duration::from_nanos(1_230_400));
    }

    #[test]
    fn delivery_after_exactly_delay_plus_serialization() {
        let pool = pool(8);
        let delay = Duration::from_micros(50);
        let mut link = Link::new(p2p(100_000_000, delay, QueueLimit::Packets(100)), 1);
        assert_eq!(send(&mut link, T0, Side::A, (0..3).map(|i| frame(&pool, i, 1514))), 3);
        let ser = Duration::from_nanos(1538 * 80); // 80 ns per byte at 100 Mb/s
        let first = T0 + ser + delay;

        let mut rx = Batch::with_capacity(8);
        assert_eq!(link.end(Side::B).receive(first - Duration::from_nanos(1), &mut rx), 0, "not a nanosecond early");
        assert_eq!(link.end(Side::A).receive(first, &mut rx), 0, "nothing comes back to the sender");
        assert_eq!(link.end(Side::B).receive(first, &mut rx), 1);
        rx.clear();

        // Back to back: each next frame one serialization time later.
        let rest = drain(&mut link);
        let times: Vec<_> = rest.iter().map(|(t, s, f)| (*t, *s, id_of(f))).collect();
        assert_eq!(times, vec![(first + ser, Side::B, 1), (first + ser * 2, Side::B, 2)]);
        let s = link.stats(Side::A);
        assert_eq!((s.enqueued, s.transmitted, s.delivered, s.queue_drops), (3, 3, 3, 0));
        assert_eq!(s.busy, ser * 3);
        drop(rest);
        assert_eq!(pool.available(), 8, "delivered frames went back to the pool");
    }

    #[test]
    fn a_small_frame_costs_the_minimum_and_an_idle_gap_resets_the_wire() {
        let pool = pool(8);
        let mut link = Link::new(p2p(1_000_000_000, Duration::ZERO, QueueLimit::Packets(10)), 1);
        send(&mut link, T0, Side::B, [frame(&pool, 7, 40)]);
        let later = T0 + Duration::from_millis(1);
        send(&mut link, later, Side::B, [frame(&pool, 8, 40)]);
        let got: Vec<_> = drain(&mut link).into_iter().map(|(t, s, f)| (t, s, id_of(&f))).collect();
        // 84 byte-times at 1 Gb/s = 672 ns; the second frame starts when it is handed over.
        let ser = Duration::from_nanos(672);
        assert_eq!(got, vec![(T0 + ser, Side::A, 7), (later + ser, Side::A, 8)]);
    }

    #[test]
    fn a_saturated_link_runs_at_exactly_its_rate() {
        // 1230.4 ns per 1514-byte frame at 10 Gb/s: the fractions must not be lost.
        let pool = pool(10_100);
        let mut link = Link::new(LinkConfig::ten_gig().with_queue(QueueLimit::Packets(20_000)), 1);
        let n = 10_000;
        send(&mut link, T0, Side::A, (0..n).map(|i| frame(&pool, i, 1514)));
        let got = drain(&mut link);
        assert_eq!(got.len(), n as usize);
        let delay = LinkConfig::ten_gig().a_to_b.delay;
        // 10 000 * 1538 * 8 bits / 10 Gb/s = 12.304 ms exactly.
        assert_eq!(got.last().unwrap().0, T0 + Duration::from_nanos(12_304_000) + delay);
        let gaps: Vec<u64> = got.windows(2).map(|w| (w[1].0 - w[0].0).as_nanos() as u64).collect();
        assert!(gaps.iter().all(|&g| g == 1230 || g == 1231), "spacing within a nanosecond of 1230.4");
    }

    #[test]
    fn a_full_drop_tail_queue_drops_and_counts() {
        let pool = pool(32);
        let mut link = Link::new(p2p(10_000_000, Duration::from_micros(10), QueueLimit::Packets(4)), 1);
        // One goes on the wire at once, four wait, five are dropped.
        assert_eq!(send(&mut link, T0, Side::A, (0..10).map(|i| frame(&pool, i, 1000))), 5);
        assert_eq!(link.queued(Side::A), (4, 4000));
        let s = *link.stats(Side::A);
        assert_eq!((s.enqueued, s.queue_drops, s.max_queue), (5, 5, 4));
        assert_eq!(link.end(Side::A).stats().tx_dropped, 5);
        assert_eq!(pool.available(), 32 - 5, "dropped frames were freed");
        let ids: Vec<u32> = drain(&mut link).iter().map(|(_, _, f)| id_of(f)).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4], "drop-tail: the first ones survive");

        // A byte limit: 3000 bytes wait behind the frame on the wire.
        let mut link = Link::new(p2p(10_000_000, Duration::ZERO, QueueLimit::Bytes(3000)), 1);
        assert_eq!(send(&mut link, T0, Side::B, (0..6).map(|i| frame(&pool, i, 1000))), 4);
        assert_eq!(link.stats(Side::B).queue_drops, 2);
        assert_eq!(link.stats(Side::B).max_queue_bytes, 3000);
        // Once the wire drains, the queue takes frames again.
        drain(&mut link);
        assert_eq!(send(&mut link, T0 + Duration::from_secs(1), Side::B, [frame(&pool, 9, 1000)]), 1);
    }

    #[test]
    fn ethernet10_one_direction_alone_runs_at_1538_byte_times_per_frame() {
        let pool = pool(1100);
        let mut link = Link::new(LinkConfig::ethernet10(), 1);
        let n = 1000;
        assert_eq!(send(&mut link, T0, Side::A, (0..n).map(|i| frame(&pool, i, 1514))), n as usize);
        let got = drain(&mut link);
        let delay = LinkConfig::ethernet10().a_to_b.delay;
        let per_frame = Duration::from_nanos(1538 * 800); // 800 ns per byte at 10 Mb/s
        for (k, (t, side, f)) in got.iter().enumerate() {
            assert_eq!((*side, id_of(f)), (Side::B, k as u32));
            assert_eq!(*t, T0 + per_frame * (k as u32 + 1) + delay);
        }
        // Frames completed in the first second: 10e6 / 8 / 1538 = 812.74 per second.
        let in_one_second = got.iter().filter(|(t, _, _)| *t - delay <= T0 + Duration::from_secs(1)).count();
        assert_eq!(in_one_second, (10_000_000 / 8 / 1538) as usize);
        assert_eq!(in_one_second, 812);
        assert_eq!(link.stats(Side::A).busy, per_frame * n);
    }

    /// The medium intervals [start, end) of delivered frames, from their arrival times.
    fn intervals(link: &LinkConfig, got: &[(Instant, Side, PBuf)]) -> Vec<(Instant, Instant, Side)> {
        let mut v: Vec<_> = got
            .iter()
            .map(|(t, side, f)| {
                let from = side.other();
                let c = link.channel(from);
                let end = *t - c.delay;
                (end - serialization(wire_bytes(f.len()), c.rate_bps), end, from)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn ethernet10_shares_one_medium_between_both_directions() {
        let pool = pool(256);
        let cfg = LinkConfig::ethernet10();
        let mut link = Link::new(cfg, 1);
        // Both ends backlogged at once: data one way, ACK-sized frames the other.
        send(&mut link, T0, Side::A, (0..50).map(|i| frame(&pool, i, 1514)));
        send(&mut link, T0, Side::B, (100..150).map(|i| frame(&pool, i, 54)));
        let got = drain(&mut link);
        assert_eq!(got.len(), 100);
        let iv = intervals(&cfg, &got);
        for w in iv.windows(2) {
            assert_eq!(w[0].1, w[1].0, "back to back and never overlapping: {:?} then {:?}", w[0], w[1]);
        }
        // The ends take turns while both have frames waiting.
        let order: Vec<Side> = iv.iter().map(|x| x.2).collect();
        assert!(order.chunks(2).all(|c| c[0] != c[1]), "{order:?}");
        let busy = link.stats(Side::A).busy + link.stats(Side::B).busy;
        assert_eq!(busy, Duration::from_nanos(50 * 1538 * 800 + 50 * 84 * 800));
        assert_eq!(iv.last().unwrap().1, T0 + busy, "the medium never idled");

        // The same load on a full-duplex link overlaps: both directions at once.
        let full = LinkConfig { duplex: Duplex::Full, ..cfg };
        let mut link = Link::new(full, 1);
        send(&mut link, T0, Side::A, (0..50).map(|i| frame(&pool, i, 1514)));
        send(&mut link, T0, Side::B, (100..150).map(|i| frame(&pool, i, 54)));
        let iv = intervals(&full, &drain(&mut link));
        assert!(iv.windows(2).any(|w| w[1].0 < w[0].1), "full duplex overlaps");
    }

    #[test]
    fn ethernet10_an_ack_waits_for_at_most_the_frame_on_the_wire() {
        let pool = pool(64);
        let mut link = Link::new(LinkConfig::ethernet10(), 1);
        send(&mut link, T0, Side::A, (0..20).map(|i| frame(&pool, i, 1514)));
        // B hands over an ACK in the middle of A's first frame.
        let mid = T0 + Duration::from_micros(500);
        send(&mut link, mid, Side::B, [frame(&pool, 99, 54)]);
        let got = drain(&mut link);
        let (t, _, _) = got.iter().find(|(_, s, _)| *s == Side::A).unwrap();
        let delay = LinkConfig::ethernet10().b_to_a.delay;
        let data = Duration::from_nanos(1538 * 800);
        assert_eq!(*t, T0 + data + Duration::from_nanos(84 * 800) + delay, "right after the frame in progress");
    }

    /// Send `n` frames of varied sizes from A, spaced `gap` apart, on `config`; the digest of
    /// every delivery (time, side, bytes), and the deliveries.
    fn run_impaired(config: LinkConfig, seed: u64, n: u32, gap: Duration) -> ([u8; 32], Vec<(Instant, Side, PBuf)>) {
        let pool = pool(n as usize * 2 + 16);
        let mut link = Link::new(config, seed);
        let mut rx = Batch::with_capacity(64);
        let mut got = Vec::new();
        let mut t = T0;
        for i in 0..n {
            send(&mut link, t, Side::A, [frame(&pool, i, 60 + (i as usize * 37) % 1454)]);
            t += gap;
            for side in [Side::A, Side::B] {
                link.end(side).receive(t, &mut rx);
                while let Some(f) = rx.pop() {
                    got.push((t, side, f));
                }
            }
        }
        got.extend(drain(&mut link));
        let mut h = Sha256::new();
        for (t, side, f) in &got {
            h.update(t.total_nanos().to_le_bytes());
            h.update([*side as u8]);
            h.update(f.data());
        }
        (h.finalize().into(), got)
    }

    fn everything(p: f64) -> Impairments {
        Impairments {
            loss: Loss::Bernoulli(p),
            corrupt: p,
            duplicate: p,
            reorder: Some(Reorder { probability: p, extra_delay: Duration::from_micros(700) }),
        }
    }

    #[test]
    fn same_seed_same_run_different_seed_different_run() {
        let config = LinkConfig::ethernet100().with_impairments(everything(0.05));
        let gap = Duration::from_micros(100);
        let (a, got) = run_impaired(config, 42, 3000, gap);
        let (b, _) = run_impaired(config, 42, 3000, gap);
        let (c, _) = run_impaired(config, 43, 3000, gap);
        assert_eq!(a, b, "same seed, same deliveries bit for bit");
        assert_ne!(a, c, "another seed, another run");
        assert!(got.len() > 2700 && got.len() < 3300);
    }

    #[test]
    fn impairing_one_direction_leaves_the_other_alone() {
        let mut config = LinkConfig::ethernet100().with_loss(Loss::Bernoulli(0.1));
        let (a, _) = run_impaired(config, 5, 1000, Duration::from_micros(50));
        config.b_to_a.impairments = everything(0.3);
        let (b, _) = run_impaired(config, 5, 1000, Duration::from_micros(50));
        assert_eq!(a, b);
    }

    #[test]
    fn bernoulli_loss_rate_is_within_tolerance() {
        let n = 20_000u32;
        let config = LinkConfig::gigabit().with_loss(Loss::Bernoulli(0.1)).with_queue(QueueLimit::Packets(n as usize));
        let mut link = Link::new(config, 9);
        let pool = pool(n as usize + 8);
        send(&mut link, T0, Side::A, (0..n).map(|i| frame(&pool, i, 100)));
        let got = drain(&mut link);
        let s = *link.stats(Side::A);
        assert_eq!(s.transmitted, n as u64);
        assert_eq!(s.lost + s.delivered, n as u64);
        assert_eq!(got.len() as u64, s.delivered);
        // Expected 2000, standard deviation 42: five sigmas either way.
        assert!((1788..=2212).contains(&s.lost), "lost {}", s.lost);
    }

    #[test]
    fn gilbert_elliott_loss_is_bursty_with_the_predicted_mean() {
        let n = 50_000u32;
        let loss = Loss::GilbertElliott { p: 0.01, r: 0.25, loss_good: 0.0, loss_bad: 0.5 };
        let mean = loss.mean_rate();
        assert!((mean - 0.005 / 0.26).abs() < 1e-12);
        let mut link = Link::new(LinkConfig::gigabit().with_loss(loss).with_queue(QueueLimit::Packets(n as usize)), 3);
        let pool = pool(n as usize + 8);
        send(&mut link, T0, Side::A, (0..n).map(|i| frame(&pool, i, 100)));
        let mut lost = vec![true; n as usize];
        for (_, _, f) in drain(&mut link) {
            lost[id_of(&f) as usize] = false;
        }
        let count = lost.iter().filter(|&&l| l).count();
        let rate = count as f64 / n as f64;
        assert!((rate - mean).abs() < 0.3 * mean, "rate {rate} vs {mean}");
        // After a loss, another loss is far likelier than on average: the losses come in bursts.
        let after_loss = lost.windows(2).filter(|w| w[0] && w[1]).count() as f64 / count as f64;
        assert!(after_loss > 10.0 * mean, "P(loss | loss) = {after_loss}");
    }

    #[test]
    fn corruption_flips_exactly_one_bit_of_a_copy() {
        let n = 500u32;
        let config = LinkConfig::gigabit().with_impairments(Impairments { corrupt: 1.0, ..Default::default() });
        let mut link = Link::new(config, 11);
        let pool = pool(n as usize + 8);
        // The sender keeps every frame, as a retransmission queue would.
        let kept: Vec<PBuf> = (0..n).map(|i| frame(&pool, i, 60 + (i as usize * 13) % 1454)).collect();
        let pristine: Vec<Vec<u8>> = kept.iter().map(|f| f.data().to_vec()).collect();
        send(&mut link, T0, Side::A, kept.iter().map(PBuf::share));
        let got = drain(&mut link);
        assert_eq!(got.len(), n as usize);
        assert_eq!(link.stats(Side::A).corrupted, n as u64);
        let mut flipped_in_header = 0;
        for (k, (_, _, f)) in got.iter().enumerate() {
            let orig = &pristine[k];
            assert!(!pool.owns(f), "a corrupted frame is a copy in the link's own buffer");
            assert_eq!(f.len(), orig.len());
            let bits: u32 = f.data().iter().zip(orig).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(bits, 1, "frame {k}: exactly one bit flipped");
            flipped_in_header += usize::from(f.data()[..4] != orig[..4]);
        }
        assert!(flipped_in_header < 50, "bits land all over the frame");
        for (f, orig) in kept.iter().zip(&pristine) {
            assert_eq!(f.data(), &orig[..], "the sender's buffer is untouched");
        }
        drop(got);
        drop(kept);
        assert_eq!(pool.available(), n as usize + 8);
    }

    #[test]
    fn duplicates_share_the_buffer_and_reordered_frames_arrive_late() {
        let config = LinkConfig::gigabit().with_impairments(Impairments { duplicate: 1.0, ..Default::default() });
        let (_, got) = run_impaired(config, 1, 100, Duration::from_micros(20));
        assert_eq!(got.len(), 200);
        for pair in got.chunks(2) {
            assert_eq!(pair[0].0, pair[1].0, "the duplicate arrives with the original");
            assert_eq!(pair[0].2.index(), pair[1].2.index(), "same buffer, no copy");
            assert_eq!(pair[0].2.data(), pair[1].2.data());
        }

        let reorder = Reorder { probability: 0.2, extra_delay: Duration::from_micros(100) };
        let config =
            LinkConfig::gigabit().with_impairments(Impairments { reorder: Some(reorder), ..Default::default() });
        let (_, got) = run_impaired(config, 1, 1000, Duration::from_micros(20));
        assert_eq!(got.len(), 1000, "nothing lost");
        let ids: Vec<u32> = got.iter().map(|(_, _, f)| id_of(f)).collect();
        let overtaken = ids.windows(2).filter(|w| w[0] > w[1]).count();
        assert!(overtaken > 100, "{overtaken} inversions");
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn delivery_stops_when_the_receive_batch_is_full() {
        let pool = pool(100);
        let mut link = Link::new(LinkConfig::gigabit(), 1);
        send(&mut link, T0, Side::A, (0..10).map(|i| frame(&pool, i, 100)));
        let late = T0 + Duration::from_millis(1);
        let mut rx = Batch::with_capacity(4);
        assert_eq!(link.end(Side::B).receive(late, &mut rx), 4);
        assert!(link.poll_at().unwrap() <= late, "the rest is still due");
        rx.clear();
        assert_eq!(link.end(Side::B).receive(late, &mut rx), 4);
        rx.clear();
        assert_eq!(link.end(Side::B).receive(late, &mut rx), 2);
        assert_eq!(link.poll_at(), None);
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let mut c = LinkConfig::ethernet10();
        c.b_to_a.rate_bps = 100_000_000;
        assert!(c.validate().is_err(), "one medium, one rate");
        assert!(LinkConfig::gigabit().with_loss(Loss::Bernoulli(1.5)).validate().is_err());
        assert!(LinkConfig::gigabit().with_queue(QueueLimit::Packets(0)).validate().is_err());
        let mut c = LinkConfig::gigabit();
        c.a_to_b.rate_bps = 0;
        assert!(c.validate().is_err());
        assert!(LinkConfig::wan(10_000_000, Duration::from_millis(20)).validate().is_ok());
    }
}
