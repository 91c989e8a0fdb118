//! End to end on simulated links: bulk transfers (chargen to discard) between stacks over
//! 10 Mb/s Ethernet, a lossy WAN and a dumbbell, checked byte for byte. Run with
//! `--nocapture` to see the simulated times and counters. The byte stream is the CLI
//! scenario harness's [`Pattern`](harness::Pattern), compiled in here with `#[path]`.

#[allow(dead_code)]
#[path = "../../ackclock-cli/src/scenario/harness.rs"]
mod harness;

mod common;

/// Named `sim` so that `cargo test sim` selects these tests.
mod sim {
    use super::harness::Pattern;
    use ackclock::sim::link::wire_bytes;
    use ackclock::sim::{
        host_config, Dumbbell, DumbbellConfig, Impairments, LinkConfig, LinkId, Loss, NodeId, QueueLimit, Reorder,
        Side, World,
    };
    use ackclock::time::{Duration, Instant};
    use ackclock::{Error, ListenerHandle, Shutdown, TcpHandle};
    use core::net::Ipv4Addr;
    use std::net::SocketAddrV4;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const CHUNK: usize = 16 * 1024;

    /// One transfer: `client` connects to `server` and sends `len` bytes, then closes its
    /// side; the server reads and discards them, checking each byte, until end of stream.
    struct Bulk {
        client: NodeId,
        server: NodeId,
        listener: ListenerHandle,
        conn: TcpHandle,
        accepted: Option<TcpHandle>,
        len: u64,
        sent: u64,
        received: u64,
        first_bad: Option<u64>,
        shut: bool,
        done_at: Option<Instant>,
        source: Pattern,
        sink: Pattern,
        buf: Vec<u8>,
    }

    impl Bulk {
        fn start(w: &mut World, client: NodeId, server: NodeId, port: u16, len: u64) -> Bulk {
            let addr = w.stack(server).iface().addr();
            let listener = w.stack_mut(server).tcp_listen(SocketAddrV4::new(addr, port), 4).unwrap();
            let conn = w.stack_mut(client).tcp_connect(SocketAddrV4::new(addr, port)).unwrap();
            Bulk {
                client,
                server,
                listener,
                conn,
                accepted: None,
                len,
                sent: 0,
                received: 0,
                first_bad: None,
                shut: false,
                done_at: None,
                source: Pattern::new(port as u64),
                sink: Pattern::new(port as u64),
                buf: vec![0; CHUNK],
            }
        }

        fn done(&self) -> bool {
            self.done_at.is_some()
        }

        /// The application's part of one step; true once the server has read end of stream.
        fn work(&mut self, w: &mut World) -> bool {
            if self.done() {
                return true;
            }
            let now = w.now();
            let s = w.stack_mut(self.client);
            while self.sent < self.len {
                let (chunk, at) = self.source.at(self.sent);
                let end = chunk.len().min(at + (self.len - self.sent) as usize);
                match s.tcp_send(self.conn, &chunk[at..end]) {
                    Ok(0) | Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => break,
                    Ok(n) => self.sent += n as u64,
                    Err(e) => panic!("send after {} bytes: {e}", self.sent),
                }
            }
            if self.sent == self.len && !self.shut {
                s.tcp_shutdown(self.conn, Shutdown::Write).unwrap();
                self.shut = true;
            }
            let r = w.stack_mut(self.server);
            if self.accepted.is_none() {
                self.accepted = r.tcp_accept(self.listener).ok();
            }
            let Some(c) = self.accepted else { return false };
            loop {
                match r.tcp_recv(c, &mut self.buf) {
                    Ok(0) => {
                        self.done_at = Some(now);
                        return true;
                    }
                    Ok(n) => {
                        let mut got = &self.buf[..n];
                        while !got.is_empty() {
                            let (want, at) = self.sink.at(self.received);
                            let k = got.len().min(want.len() - at);
                            if self.first_bad.is_none() && got[..k] != want[at..at + k] {
                                let d = got.iter().zip(&want[at..]).position(|(x, y)| x != y).unwrap();
                                self.first_bad = Some(self.received + d as u64);
                            }
                            self.received += k as u64;
                            got = &got[k..];
                        }
                    }
                    Err(Error::WouldBlock) => return false,
                    Err(e) => panic!("recv after {} bytes: {e}", self.received),
                }
            }
        }

        fn assert_exact(&self) {
            assert!(self.done(), "transfer incomplete: sent {} received {} of {}", self.sent, self.received, self.len);
            assert_eq!(self.first_bad, None, "first wrong byte");
            assert_eq!(self.received, self.len, "byte count");
        }
    }

    /// Run until every transfer is done or `limit` of simulated time passed.
    fn run(w: &mut World, bulks: &mut [Bulk], limit: Duration) {
        let end = w.now() + limit;
        w.run_while(|w| {
            let mut all = true;
            for b in bulks.iter_mut() {
                all &= b.work(w);
            }
            !all && w.now() < end
        });
    }

    fn pair(seed: u64, config: LinkConfig) -> (World, NodeId, NodeId, LinkId) {
        let mut w = World::new(seed);
        let a = w.add_stack(host_config(A, 24, seed ^ 1));
        let b = w.add_stack(host_config(B, 24, seed ^ 2));
        let link = w.connect(a, b, config);
        (w, a, b, link)
    }

    /// What a run looked like, for the report and for comparing runs.
    #[derive(Debug, PartialEq)]
    struct Outcome {
        time: Instant,
        /// The sender's MSS and the payload of its full-sized segments.
        smss: u16,
        eff_mss: u16,
        steps: u64,
        retransmitted: u64,
        timeouts: u64,
        conn_retransmits: u64,
        fast_retransmits: u64,
        rtos: u64,
        bad_checksums: u64,
        /// Header prediction: the sender's pure ACKs and the receiver's data on the fast
        /// path, against both sides' slow-path segments.
        fast_acks: u64,
        fast_data: u64,
        slow: (u64, u64),
        data: ackclock::sim::LinkStats,
        acks: ackclock::sim::LinkStats,
    }

    fn outcome(w: &World, bulk: &Bulk, link: LinkId) -> Outcome {
        let c = w.stack(bulk.client).counters();
        let r = w.stack(bulk.server).counters();
        let info = w.stack(bulk.client).tcp_info(bulk.conn).ok();
        let stats = info.map(|i| i.stats).unwrap_or_default();
        Outcome {
            time: bulk.done_at.unwrap_or(w.now()),
            smss: info.map_or(0, |i| i.smss),
            eff_mss: info.map_or(0, |i| i.eff_mss),
            steps: w.steps(),
            retransmitted: c.retransmitted,
            timeouts: c.timeouts,
            conn_retransmits: stats.retransmits,
            fast_retransmits: stats.fast_retransmits,
            rtos: stats.rtos,
            bad_checksums: r.drops_bad_checksum + stats.bad_checksums,
            fast_acks: c.fast_path_acks,
            fast_data: r.fast_path_data,
            slow: (c.slow_path, r.slow_path),
            data: *w.link_stats(link, Side::A),
            acks: *w.link_stats(link, Side::B),
        }
    }

    fn report(name: &str, len: u64, start: Instant, o: &Outcome, wall: std::time::Duration) {
        let secs = (o.time - start).as_secs_f64();
        println!(
            "{name}: {len} bytes in {secs:.6} s simulated ({:.3} Mbit/s goodput), {} steps, wall {:.3} s",
            len as f64 * 8.0 / secs / 1e6,
            o.steps,
            wall.as_secs_f64()
        );
        println!(
            "  sender: retransmitted {} (fast {}, RTOs {}), stack timeouts {}; receiver bad checksums {}; \
             fast path: {} ACKs at the sender, {} data at the receiver, slow path {:?}",
            o.retransmitted, o.fast_retransmits, o.rtos, o.timeouts, o.bad_checksums, o.fast_acks, o.fast_data, o.slow
        );
        let d = &o.data;
        println!(
            "  data link: {} frames delivered, {} queue drops, {} lost, {} corrupted, {} duplicated, {} reordered, busy {:?}",
            d.delivered, d.queue_drops, d.lost, d.corrupted, d.duplicated, d.reordered, d.busy
        );
        println!("  ack link: {} frames delivered, busy {:?}", o.acks.delivered, o.acks.busy);
    }

    /// Transfer `len` bytes from A to B over `config`; returns the outcome.
    fn transfer(seed: u64, config: LinkConfig, len: u64, limit: Duration, name: &str) -> Outcome {
        let wall = std::time::Instant::now();
        let (mut w, a, b, link) = pair(seed, config);
        let start = w.now();
        let mut bulk = [Bulk::start(&mut w, a, b, 5001, len)];
        run(&mut w, &mut bulk, limit);
        let o = outcome(&w, &bulk[0], link);
        report(name, len, start, &o, wall.elapsed());
        bulk[0].assert_exact();
        assert_eq!(w.stalls(), 0);
        o
    }

    /// The best goodput a shared 10 Mb/s medium allows for the sender's full-sized segments
    /// with one bare ACK per two segments (delayed ACKs), in bytes per second.
    fn ethernet10_ceiling(o: &Outcome) -> f64 {
        let options = (o.smss - o.eff_mss) as usize; // e.g. 12 bytes of timestamps
        let frame = wire_bytes(14 + 20 + 20 + options + o.eff_mss as usize) as f64;
        let ack = wire_bytes(14 + 20 + 20 + options) as f64;
        let per_two = 2.0 * frame + ack;
        2.0 * o.eff_mss as f64 / (per_two * 8.0 / 10e6)
    }

    #[test]
    fn one_megabyte_over_ethernet10() {
        let len = 1 << 20;
        let o = transfer(1, LinkConfig::ethernet10(), len, Duration::from_secs(30), "1 MB over ethernet10");
        assert_eq!(o.retransmitted, 0, "a clean link loses nothing");
        assert_eq!(o.data.queue_drops + o.acks.queue_drops, 0);
        let secs = o.time.total_nanos() as f64 / 1e9;
        let ceiling = ethernet10_ceiling(&o);
        let goodput = len as f64 / secs;
        assert!(goodput <= ceiling, "cannot beat the medium: {goodput} > {ceiling}");
        assert!(goodput > 0.8 * ceiling, "the medium is kept busy: {goodput} vs {ceiling}");
    }

    #[test]
    fn one_megabyte_over_a_lossy_wan() {
        let config = LinkConfig::wan(10_000_000, Duration::from_millis(20)).with_loss(Loss::Bernoulli(0.01));
        let o = transfer(2, config, 1 << 20, Duration::from_secs(120), "1 MB over wan(10 Mbit/s, 20 ms), 1% loss");
        assert!(o.data.lost + o.acks.lost > 0, "the link did lose frames");
        assert!(o.retransmitted >= o.data.lost, "every lost data segment was sent again");
    }

    #[test]
    fn every_impairment_at_once_still_delivers_byte_exact() {
        let imp = Impairments {
            loss: Loss::GilbertElliott { p: 0.005, r: 0.3, loss_good: 0.001, loss_bad: 0.3 },
            corrupt: 0.005,
            duplicate: 0.005,
            reorder: Some(Reorder { probability: 0.01, extra_delay: Duration::from_millis(3) }),
        };
        let config = LinkConfig::wan(20_000_000, Duration::from_millis(5)).with_impairments(imp);
        let o = transfer(3, config, 1 << 20, Duration::from_secs(120), "1 MB, all impairments");
        assert!(o.data.corrupted > 0 && o.data.duplicated > 0 && o.data.reordered > 0 && o.data.lost > 0);
        assert!(o.bad_checksums > 0, "corrupted segments were caught by checksums");
    }

    #[test]
    fn same_seed_same_transfer_different_seed_different_transfer() {
        let imp = Impairments {
            loss: Loss::Bernoulli(0.02),
            corrupt: 0.01,
            duplicate: 0.01,
            reorder: Some(Reorder { probability: 0.02, extra_delay: Duration::from_millis(2) }),
        };
        let config = LinkConfig::wan(10_000_000, Duration::from_millis(10)).with_impairments(imp);
        let limit = Duration::from_secs(120);
        let a = transfer(7, config, 256 * 1024, limit, "seed 7");
        let b = transfer(7, config, 256 * 1024, limit, "seed 7 again");
        let c = transfer(8, config, 256 * 1024, limit, "seed 8");
        assert_eq!(a, b, "the same seed replays bit for bit");
        assert_ne!(a, c);
    }

    /// The predicted transmit path (new data in order from the connection's header
    /// template, Jacobson 1993) abbreviates the general one and changes nothing the peer
    /// sees. The sender's trace turns the prediction off (and only records), so the same
    /// seed with the trace on and off must give the same frames both ways, byte for byte:
    /// over a clean 10 Mb/s Ethernet, through loss, corruption, duplication and
    /// reordering (retransmissions, SACK recovery, the windows closing), with Nagle off
    /// (short segments sent at once), and with a send buffer that holds the whole transfer
    /// (sent after the close, the FIN queued behind it) or 64 KiB of it.
    #[test]
    fn the_predicted_transmit_path_sends_what_the_general_path_sends() {
        let imp = Impairments {
            loss: Loss::Bernoulli(0.02),
            corrupt: 0.01,
            duplicate: 0.01,
            reorder: Some(Reorder { probability: 0.02, extra_delay: Duration::from_millis(2) }),
        };
        let impaired = LinkConfig::wan(10_000_000, Duration::from_millis(10)).with_impairments(imp);
        let small = Some(64 * 1024);
        for (seed, config, nodelay, send_buffer) in [
            (21, LinkConfig::ethernet10(), false, small),
            (22, LinkConfig::ethernet10(), false, None),
            (23, impaired, false, None),
            (24, impaired, true, small),
        ] {
            let go = |general: bool| {
                let (mut w, a, b, _) = pair(seed, config);
                w.stack_mut(a).set_tracing(general);
                let out = crate::common::capture::Shared::default();
                w.capture(a, out.clone(), ackclock::phy::Resolution::Nanos).unwrap();
                let mut bulk = [Bulk::start(&mut w, a, b, 5001, 512 * 1024)];
                let s = w.stack_mut(a);
                let opts = s.tcp_options(bulk[0].conn).unwrap();
                let send_buffer = send_buffer.unwrap_or(opts.send_buffer);
                s.tcp_set_options(bulk[0].conn, ackclock::tcp::SocketOptions { nodelay, send_buffer, ..opts }).unwrap();
                run(&mut w, &mut bulk, Duration::from_secs(120));
                bulk[0].assert_exact();
                w.end_capture(a).unwrap().unwrap();
                let c = w.stack(a).counters();
                let frames = out.bytes();
                (frames, c.fast_path_sends, c.segs_out)
            };
            let (general, none, _) = go(true);
            let (predicted, sends, segs) = go(false);
            println!("seed {seed}: {sends} of {segs} segments predicted, {} capture bytes", predicted.len());
            assert_eq!(none, 0, "seed {seed}: the trace turns the prediction off");
            assert!(sends > segs / 2, "seed {seed}: {sends} of {segs} segments predicted");
            let first = general.iter().zip(&predicted).position(|(x, y)| x != y);
            assert_eq!(
                (first, general.len()),
                (None, predicted.len()),
                "seed {seed}: the captures differ (first differing byte, length)"
            );
        }
    }

    /// Jacobson 1988's experiment: 8 MB over simulated 10 Mb/s Ethernet, about 7 s of simulated
    /// time. The wall time is printed, never asserted.
    #[test]
    fn eight_megabytes_over_ethernet10() {
        let len = 8 << 20;
        let o = transfer(0, LinkConfig::ethernet10(), len, Duration::from_secs(60), "8 MB over ethernet10");
        let secs = o.time.total_nanos() as f64 / 1e9;
        let ideal = len as f64 / ethernet10_ceiling(&o);
        assert!(secs >= ideal && secs < 1.15 * ideal, "{secs} s vs ideal {ideal} s");
        assert_eq!(o.retransmitted, 0);
    }

    #[test]
    fn both_directions_share_the_ethernet10_medium() {
        let (mut w, a, b, link) = pair(4, LinkConfig::ethernet10());
        let len = 512 * 1024;
        let mut bulks = [Bulk::start(&mut w, a, b, 6001, len), Bulk::start(&mut w, b, a, 6002, len)];
        run(&mut w, &mut bulks, Duration::from_secs(30));
        for x in &bulks {
            x.assert_exact();
        }
        let end = bulks.iter().map(|x| x.done_at.unwrap()).max().unwrap();
        let busy = w.link_stats(link, Side::A).busy + w.link_stats(link, Side::B).busy;
        // One medium: never busier than the time elapsed, plus the frame still on the wire.
        let on_wire = Duration::from_nanos(wire_bytes(1514) as u64 * 800);
        assert!(busy <= w.now() - Instant::ZERO + on_wire, "one medium: busy {busy:?} by {:?}", w.now());
        assert!(busy.as_secs_f64() > 0.8 * end.total_nanos() as f64 / 1e9, "and well used");
        println!("both ways over ethernet10: 2 x {len} bytes by {end:?}, medium busy {busy:?}");
    }

    #[test]
    fn dumbbell_flows_share_the_bottleneck() {
        let mut w = World::new(5);
        let config = DumbbellConfig {
            pairs: 3,
            sender_access: LinkConfig::ethernet100(),
            receiver_access: LinkConfig::ethernet100(),
            bottleneck: LinkConfig::wan(10_000_000, Duration::from_millis(10)).with_queue(QueueLimit::Packets(30)),
        };
        let d = Dumbbell::build(&mut w, &config, host_config);
        let len = 512 * 1024;
        let mut bulks: Vec<Bulk> =
            (0..3).map(|i| Bulk::start(&mut w, d.senders[i], d.receivers[i], 7000 + i as u16, len)).collect();
        run(&mut w, &mut bulks, Duration::from_secs(60));
        for x in &bulks {
            x.assert_exact();
        }
        let bn = *w.link_stats(d.bottleneck, Side::A);
        let end = bulks.iter().map(|x| x.done_at.unwrap()).max().unwrap();
        println!(
            "dumbbell: 3 x {len} bytes by {end:?}; bottleneck {} frames, {} queue drops (max queue {}), busy {:?}; \
             left router {:?}",
            bn.delivered,
            bn.queue_drops,
            bn.max_queue,
            bn.busy,
            w.router_stats(d.left)
        );
        for (i, x) in bulks.iter().enumerate() {
            let c = w.stack(x.client).counters();
            println!("  flow {i}: done at {:?}, retransmitted {}", x.done_at.unwrap(), c.retransmitted);
        }
        assert!(bn.queue_drops > 0, "three flows overflow a 30-packet bottleneck queue");
        assert!(bn.max_queue <= 30);
        // The bottleneck carried all the data: at least 3 x len bytes of payload in 10 Mb/s.
        assert!(end.total_nanos() as f64 / 1e9 > (3 * len) as f64 * 8.0 / 10e6);
        assert_eq!(w.router_stats(d.left).malformed, 0);
    }
}
