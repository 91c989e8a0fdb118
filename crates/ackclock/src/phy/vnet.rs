//! The virtio-net header a TAP or TUN opened with `IFF_VNET_HDR` puts before each frame:
//! the 12-byte `virtio_net_hdr_v1` (VIRTIO 1.0 layout, little-endian; `num_buffers` unused
//! by TAP and TUN), in `include/uapi/linux/virtio_net.h`. The 10-byte legacy form carries
//! the same fields.
//!
//! Received, it says whether the transport checksum is left to us as a pseudo-header sum
//! (`NEEDS_CSUM`, set as [`Flags::CSUM_PARTIAL`]: the bytes never left the host, so they are
//! known good), verified (`DATA_VALID`, set as [`Flags::CSUM_VERIFIED`]), and whether the
//! frame is a TCP/IPv4 segment of up to 64 KiB that the kernel did not cut (`GSO_TCPV4`, set
//! as [`Flags::GSO_TCPV4`] with `meta.gso_size`). Sent, it asks the kernel for the same: to
//! complete a checksum, to cut a segment. `csum_start` counts from the frame's first byte,
//! whatever the link header is (14 bytes of Ethernet on a TAP, none on a TUN), so the code
//! is the same for both devices.

use super::tuntap::TapCounters;
use crate::buf::{Flags, PBuf};

/// Size of the `virtio_net_hdr_v1` in offload mode.
pub const VNET_HDR_LEN: usize = 12;

// virtio_net_hdr flags and GSO types (include/uapi/linux/virtio_net.h).
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;
pub(super) const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// Set a received frame's metadata from its virtio-net header. `false`: drop the frame.
pub(super) fn apply_vnet_header(h: &[u8; VNET_HDR_LEN], buf: &mut PBuf, counters: &mut TapCounters) -> bool {
    let le = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
    let (flags, gso_type, gso_size, csum_start, csum_offset) = (h[0], h[1], le(4), le(6), le(8));
    let len = buf.len();
    if flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
        if csum_start as usize + csum_offset as usize + 2 > len {
            return false;
        }
        buf.meta.flags.insert(Flags::CSUM_PARTIAL);
        buf.meta.csum_start = csum_start;
        buf.meta.csum_offset = csum_offset;
        counters.rx_csum_partial += 1;
    } else if flags & VIRTIO_NET_HDR_F_DATA_VALID != 0 {
        buf.meta.flags.insert(Flags::CSUM_VERIFIED);
        counters.rx_csum_valid += 1;
    }
    match gso_type & !VIRTIO_NET_HDR_GSO_ECN {
        VIRTIO_NET_HDR_GSO_NONE => true,
        VIRTIO_NET_HDR_GSO_TCPV4 if gso_size > 0 => {
            buf.meta.flags.insert(Flags::GSO_TCPV4);
            buf.meta.gso_size = gso_size;
            counters.rx_gso += 1;
            true
        }
        // TSO6 and UFO were not offered (TUNSETOFFLOAD), so these do not come.
        _ => false,
    }
}

/// The virtio-net header for a frame to send; `None` if its offload metadata is unusable.
pub(super) fn vnet_header_for(frame: &PBuf) -> Option<[u8; VNET_HDR_LEN]> {
    let mut h = [0u8; VNET_HDR_LEN];
    let m = &frame.meta;
    let data = frame.data();
    if m.flags.contains(Flags::CSUM_PARTIAL) {
        let (start, offset) = (m.csum_start as usize, m.csum_offset as usize);
        if start + offset + 2 > data.len() {
            return None;
        }
        h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        h[6..8].copy_from_slice(&m.csum_start.to_le_bytes());
        h[8..10].copy_from_slice(&m.csum_offset.to_le_bytes());
    }
    if m.flags.contains(Flags::GSO_TCPV4) {
        // As in Linux, a segment to be cut must leave its checksum to the device too; the
        // transport (TCP) header starts at csum_start.
        let start = m.csum_start as usize;
        if !m.flags.contains(Flags::CSUM_PARTIAL) || m.gso_size == 0 || start + 20 > data.len() {
            return None;
        }
        let hdr_len = start + (data[start + 12] >> 4) as usize * 4;
        if hdr_len > data.len() {
            return None;
        }
        h[1] = VIRTIO_NET_HDR_GSO_TCPV4;
        h[2..4].copy_from_slice(&(hdr_len as u16).to_le_bytes());
        h[4..6].copy_from_slice(&m.gso_size.to_le_bytes());
    }
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};

    fn pool() -> Pool {
        Pool::new(PoolConfig { buffers: 2, buffer_size: 512, headroom: 64 }).unwrap()
    }

    /// A `link`-byte link header + IPv4 (20) + TCP (32-byte header) frame of `payload` bytes.
    fn frame(pool: &Pool, link: usize, payload: usize) -> PBuf {
        let mut b = pool.alloc().unwrap();
        let bytes = b.append(link + 20 + 32 + payload).unwrap();
        bytes.fill(0);
        bytes[link] = 0x45;
        bytes[link + 20 + 12] = 8 << 4;
        b
    }

    #[test]
    fn vnet_header_for_plain_partial_and_gso_frames() {
        let p = pool();
        let mut f = frame(&p, 14, 100);
        assert_eq!(vnet_header_for(&f), Some([0; VNET_HDR_LEN]));
        f.meta.flags.insert(Flags::CSUM_PARTIAL);
        f.meta.csum_start = 34;
        f.meta.csum_offset = 16;
        assert_eq!(vnet_header_for(&f), Some([1, 0, 0, 0, 0, 0, 34, 0, 16, 0, 0, 0]));
        f.meta.flags.insert(Flags::GSO_TCPV4);
        f.meta.gso_size = 1448;
        let h = vnet_header_for(&f).unwrap();
        assert_eq!(h[1], VIRTIO_NET_HDR_GSO_TCPV4);
        assert_eq!(u16::from_le_bytes([h[2], h[3]]), 34 + 32, "hdr_len covers the TCP header");
        assert_eq!(u16::from_le_bytes([h[4], h[5]]), 1448);
        // A checksum field beyond the frame, or GSO without partial checksum, is refused.
        f.meta.csum_offset = 200;
        assert_eq!(vnet_header_for(&f), None);
        f.meta.csum_offset = 16;
        f.meta.flags.remove(Flags::CSUM_PARTIAL);
        assert_eq!(vnet_header_for(&f), None);
    }

    /// On a TUN the IPv4 header is the frame's first byte: the TCP header, and so
    /// `csum_start`, is at 20, and `hdr_len` is 20 + the TCP header.
    #[test]
    fn vnet_header_for_a_frame_without_link_header() {
        let p = pool();
        let mut f = frame(&p, 0, 300);
        f.meta.flags.insert(Flags::CSUM_PARTIAL | Flags::GSO_TCPV4);
        f.meta.csum_start = 20;
        f.meta.csum_offset = 16;
        f.meta.gso_size = 1448;
        let h = vnet_header_for(&f).unwrap();
        assert_eq!(h, [1, VIRTIO_NET_HDR_GSO_TCPV4, 52, 0, 0xa8, 5, 20, 0, 16, 0, 0, 0]);
    }

    #[test]
    fn received_vnet_header_sets_meta() {
        let p = pool();
        let mut c = TapCounters::default();
        let mut f = frame(&p, 14, 100);
        let h = [1, VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN, 66, 0, 0xa8, 5, 34, 0, 16, 0, 0, 0];
        assert!(apply_vnet_header(&h, &mut f, &mut c));
        assert!(f.meta.flags.contains(Flags::CSUM_PARTIAL | Flags::GSO_TCPV4));
        assert_eq!((f.meta.csum_start, f.meta.csum_offset, f.meta.gso_size), (34, 16, 1448));
        let mut g = frame(&p, 14, 10);
        assert!(apply_vnet_header(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], &mut g, &mut c));
        assert!(g.meta.flags.contains(Flags::CSUM_VERIFIED));
        assert_eq!((c.rx_csum_partial, c.rx_csum_valid, c.rx_gso), (1, 1, 1));
        // Unknown GSO types and checksum fields outside the frame are dropped.
        drop(g);
        let mut g = frame(&p, 14, 10);
        assert!(!apply_vnet_header(&[0, 4, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0], &mut g, &mut c));
        assert!(!apply_vnet_header(&[1, 0, 0, 0, 0, 0, 200, 0, 16, 0, 0, 0], &mut g, &mut c));
    }
}
