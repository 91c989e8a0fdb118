//! A TCP transfer through the impairment wrapper (phy::impair), the stand-in for netem:
//! 2% loss, 20 ms delay each way, reordering and duplication, byte-exact.

mod common;

use ackclock::phy::{pipe, Capabilities, Impaired, Impairment, PipeConfig};
use ackclock::sim::{Loss, Reorder};
use ackclock::time::{Duration, Instant};
use ackclock::{Error, Shutdown, Stack};
use common::{config, A, B};
use std::net::SocketAddrV4;

#[test]
fn transfer_survives_loss_delay_reordering_and_duplication() {
    let imp = Impairment {
        delay: Duration::from_millis(20),
        loss: Loss::Bernoulli(0.02),
        duplicate: 0.01,
        reorder: Some(Reorder { probability: 0.02, extra_delay: Duration::from_millis(5) }),
    };
    let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
    let mut da = Impaired::new(da, imp, Impairment::default(), 11, 4096);
    let mut db = Impaired::new(db, imp, Impairment::default(), 12, 4096);
    let mut now = Instant::from_secs(1);
    let caps = Capabilities::ethernet(1500);
    let mut a = Stack::new(config(A, 1), caps, now).unwrap();
    let mut b = Stack::new(config(B, 2), caps, now).unwrap();
    let l = b.tcp_listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let c = a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect();
    let (mut sent, mut got, mut server, mut shut) = (0, Vec::new(), None, false);
    let mut buf = vec![0u8; 65536];
    let deadline = now + Duration::from_secs(600);
    let done = loop {
        assert!(now < deadline, "transfer did not finish in 600 s of virtual time");
        a.receive(now, &mut da);
        b.receive(now, &mut db);
        server = server.or_else(|| b.tcp_accept(l).ok());
        while sent < data.len() {
            match a.tcp_send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(Error::WouldBlock | Error::NoBufferSpace) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        if sent == data.len() && !shut {
            a.tcp_shutdown(c, Shutdown::Write).unwrap();
            shut = true;
        }
        let mut eof = false;
        if let Some(s) = server {
            loop {
                match b.tcp_recv(s, &mut buf) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(Error::WouldBlock) => break,
                    Err(e) => panic!("recv: {e}"),
                }
            }
        }
        a.transmit(now, &mut da);
        b.transmit(now, &mut db);
        if eof {
            break true;
        }
        use ackclock::phy::Device;
        let next = [a.poll_at(), b.poll_at(), da.poll_at(), db.poll_at()].into_iter().flatten().min();
        // Frames sitting in a pipe are due now; otherwise jump to the next event.
        let pending = da.inner().pending() + db.inner().pending() > 0;
        now = match next {
            _ if pending => now,
            Some(t) if t > now => t,
            _ => now + Duration::from_micros(100),
        };
    };
    assert!(done);
    assert!(got == data, "received {} of {} bytes, or different bytes", got.len(), data.len());
    let (tx, _) = da.impair_stats();
    assert!(tx.lost > 0 && tx.reordered > 0 && tx.duplicated > 0, "{tx:?}");
    let info = a.tcp_info(c).unwrap();
    assert!(info.stats.retransmits > 0);
    assert!(info.stats.fast_retransmits > 0, "losses are mostly repaired without a timeout: {:?}", info.stats);
}
