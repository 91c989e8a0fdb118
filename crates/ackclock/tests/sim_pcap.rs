//! pcap capture: the file format, parsed back, and the capturing device.

mod common;

/// Named `sim` so that `cargo test sim` selects these tests.
mod sim {
    use crate::common::capture::Shared;
    use ackclock::buf::{Pool, PoolConfig};
    use ackclock::phy::{pipe, Batch, Capabilities, Capture, Device, DeviceStats, PcapWriter, PipeConfig, Resolution};
    use ackclock::sim::{host_config, LinkConfig, World};
    use ackclock::time::{Duration, Instant};
    use ackclock::wire::{EtherType, EthernetFrame, Ipv4Packet, TcpFlags, TcpPacket};
    use ackclock::Stack;
    use core::net::Ipv4Addr;
    use std::net::SocketAddrV4;

    #[derive(Debug)]
    struct Header {
        magic: u32,
        version: (u16, u16),
        snaplen: u32,
        linktype: u32,
    }

    #[derive(Debug, PartialEq)]
    struct Record {
        secs: u32,
        frac: u32,
        orig_len: u32,
        data: Vec<u8>,
    }

    /// A reader for what the writer writes (little-endian classic pcap).
    fn parse(bytes: &[u8]) -> (Header, Vec<Record>) {
        let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u16_at = |b: &[u8], i: usize| u16::from_le_bytes(b[i..i + 2].try_into().unwrap());
        assert!(bytes.len() >= 24, "global header");
        let header = Header {
            magic: u32_at(bytes, 0),
            version: (u16_at(bytes, 4), u16_at(bytes, 6)),
            snaplen: u32_at(bytes, 16),
            linktype: u32_at(bytes, 20),
        };
        assert_eq!((u32_at(bytes, 8), u32_at(bytes, 12)), (0, 0), "thiszone, sigfigs");
        let mut records = Vec::new();
        let mut at = 24;
        while at < bytes.len() {
            let incl = u32_at(bytes, at + 8) as usize;
            records.push(Record {
                secs: u32_at(bytes, at),
                frac: u32_at(bytes, at + 4),
                orig_len: u32_at(bytes, at + 12),
                data: bytes[at + 16..at + 16 + incl].to_vec(),
            });
            at += 16 + incl;
        }
        assert_eq!(at, bytes.len(), "no trailing bytes");
        (header, records)
    }

    #[test]
    fn writer_produces_classic_pcap_in_micro_and_nanoseconds() {
        let mut w = PcapWriter::new(Vec::new(), Resolution::Micros).unwrap();
        w.write_frame(Instant::from_nanos(1_234_567_891), &[1, 2, 3]).unwrap();
        w.write_frame(Instant::from_secs(5), &[0xaa; 60]).unwrap();
        assert_eq!(w.records(), 2);
        let bytes = w.into_inner();
        assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "0xa1b2c3d4 little-endian");
        let (h, r) = parse(&bytes);
        assert_eq!((h.magic, h.version, h.snaplen, h.linktype), (0xa1b2_c3d4, (2, 4), 262_144, 1));
        assert_eq!(r[0], Record { secs: 1, frac: 234_567, orig_len: 3, data: vec![1, 2, 3] });
        assert_eq!(r[1], Record { secs: 5, frac: 0, orig_len: 60, data: vec![0xaa; 60] });

        let mut w = PcapWriter::new(Vec::new(), Resolution::Nanos).unwrap();
        w.write_frame(Instant::from_nanos(1_234_567_891), &[9]).unwrap();
        let (h, r) = parse(&w.into_inner());
        assert_eq!(h.magic, 0xa1b2_3c4d);
        assert_eq!((r[0].secs, r[0].frac), (1, 234_567_891));
    }

    #[test]
    fn snaplen_truncates_records_but_keeps_the_original_length() {
        let mut w = PcapWriter::with_snaplen(Vec::new(), Resolution::Micros, 64).unwrap();
        w.write_frame(Instant::ZERO, &[7; 1514]).unwrap();
        let (h, r) = parse(&w.into_inner());
        assert_eq!(h.snaplen, 64);
        assert_eq!((r[0].data.len(), r[0].orig_len), (64, 1514));
    }

    /// A device that takes at most one frame per transmit call and never receives.
    struct Trickle {
        taken: Vec<Vec<u8>>,
    }

    impl Device for Trickle {
        fn capabilities(&self) -> Capabilities {
            Capabilities::ethernet(1500)
        }
        fn receive(&mut self, _now: Instant, _rx: &mut Batch) -> usize {
            0
        }
        fn transmit(&mut self, _now: Instant, tx: &mut Batch) -> usize {
            match tx.pop() {
                Some(f) => {
                    self.taken.push(f.data().to_vec());
                    1
                }
                None => 0,
            }
        }
        fn stats(&self) -> DeviceStats {
            DeviceStats::default()
        }
    }

    #[test]
    fn capture_records_each_transmitted_frame_once_even_with_push_back() {
        let pool = Pool::new(PoolConfig { buffers: 8, ..Default::default() }).unwrap();
        let mut dev =
            Capture::new(Trickle { taken: Vec::new() }, PcapWriter::new(Vec::new(), Resolution::Nanos).unwrap());
        let mut tx = Batch::with_capacity(8);
        for i in 0..3u8 {
            let mut b = pool.alloc().unwrap();
            b.append(60).unwrap().fill(i);
            tx.push(b).unwrap();
        }
        for t in 1..=3 {
            assert_eq!(dev.transmit(Instant::from_micros(t), &mut tx), 1);
        }
        assert!(tx.is_empty());
        assert_eq!(dev.get_ref().taken.len(), 3);
        let (_, pcap) = dev.into_parts();
        let (_, r) = parse(&pcap.into_inner());
        assert_eq!(r.len(), 3, "recorded once each, when first offered");
        assert_eq!(r.iter().map(|r| r.data[0]).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(r.iter().all(|r| (r.secs, r.frac) == (0, 1_000)));
    }

    /// Two stacks over a pipe, one of them capturing; a TCP handshake is in the capture, with
    /// the stack clock's timestamps.
    #[test]
    fn capture_wraps_a_device_and_records_both_directions() {
        let (a_end, mut b_end) = pipe(PipeConfig::default());
        let now = Instant::from_secs(3);
        let caps = Capabilities::ethernet(1500);
        let (ip_a, ip_b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut a = Stack::new(host_config(ip_a, 24, 1), caps, now).unwrap();
        let mut b = Stack::new(host_config(ip_b, 24, 2), caps, now).unwrap();
        let mut dev = Capture::new(a_end, PcapWriter::new(Vec::new(), Resolution::Micros).unwrap());
        let l = b.tcp_listen(SocketAddrV4::new(ip_b, 80), 4).unwrap();
        a.tcp_connect(SocketAddrV4::new(ip_b, 80)).unwrap();
        let mut t = now;
        for _ in 0..10 {
            a.poll(t, &mut dev);
            b.poll(t, &mut b_end);
            t += Duration::from_millis(1);
        }
        assert!(b.tcp_accept(l).is_ok());
        assert!(dev.error().is_none());
        let (a_end, pcap) = dev.into_parts();
        let (_, records) = parse(&pcap.into_inner());
        let stats = a_end.stats();
        assert_eq!(records.len() as u64, stats.rx_frames + stats.tx_frames, "every frame, both ways");
        let tcp_flags: Vec<(u32, u8)> = records
            .iter()
            .filter_map(|r| {
                let eth = EthernetFrame::new_checked(&r.data[..]).ok()?;
                (eth.ethertype() == EtherType::IPV4).then_some(())?;
                let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
                let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
                let f = tcp.flags();
                Some((r.frac, (f.contains(TcpFlags::SYN) as u8) << 1 | f.contains(TcpFlags::ACK) as u8))
            })
            .collect();
        // SYN (sent at 3.000), SYN-ACK (received at 3.000 or later), ACK.
        assert_eq!(tcp_flags.iter().map(|f| f.1).collect::<Vec<_>>(), vec![0b10, 0b11, 0b01]);
        assert!(records.iter().all(|r| r.secs == 3 && r.frac < 10_000), "timestamps from the stack's clock");
        assert!(records.windows(2).all(|w| w[0].frac <= w[1].frac));
    }

    #[test]
    fn world_capture_stamps_frames_with_virtual_time() {
        let mut world = World::new(1);
        let (ip_a, ip_b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let a = world.add_host(ip_a, 24);
        let b = world.add_host(ip_b, 24);
        let link = world.connect(a, b, LinkConfig::ethernet10());
        let out = Shared::default();
        world.capture(b, out.clone(), Resolution::Nanos).unwrap();
        let l = world.stack_mut(b).tcp_listen(SocketAddrV4::new(ip_b, 7), 4).unwrap();
        world.stack_mut(a).tcp_connect(SocketAddrV4::new(ip_b, 7)).unwrap();
        world.run_until(Instant::from_millis(100));
        assert!(world.stack_mut(b).tcp_accept(l).is_ok());
        let writer = world.end_capture(b).unwrap().unwrap();
        assert_eq!(writer.records(), {
            let s = world.link_stats(link, ackclock::sim::Side::A);
            let r = world.link_stats(link, ackclock::sim::Side::B);
            s.delivered + r.enqueued
        });
        let bytes = out.bytes();
        let (h, records) = parse(&bytes);
        assert_eq!(h.magic, 0xa1b2_3c4d);
        // B's first received frame is A's gratuitous ARP, sent at time zero: it arrives after
        // 84 byte-times (67.2 us) and the 10 us propagation delay.
        let first_rx = records.iter().find(|r| r.data[6..12] != world.stack(b).iface().mac().0).unwrap();
        assert_eq!((first_rx.secs, first_rx.frac), (0, 67_200 + 10_000));
    }
}
