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
        #![proptest_config(crate::proptest_config(ProptestConfig::default()))]

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
