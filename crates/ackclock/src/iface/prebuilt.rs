//! A sender's link and IPv4 headers, kept prebuilt: Jacobson's header template (1993's
//! 30-instruction path kept a connection's headers ready and wrote only what changed). A
//! connection's frames repeat every byte of the Ethernet and IPv4 headers but three IPv4
//! fields (total length, identification and the header checksum), so after the first frame
//! went out the headers are copied from here and those three are stored, the checksum
//! from a sum of the constant words made once. The copy is of the bytes the full build
//! wrote, so both builds give the same frame.

use core::net::Ipv4Addr;

use crate::wire::checksum;

/// Bytes of an Ethernet header.
const ETH: usize = 14;
/// Bytes of an IPv4 header without options (the only kind this stack sends).
const IP: usize = 20;

/// The headers of the last frame a sender built, and the sum of their constant IPv4 words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prebuilt {
    /// Ethernet header then IPv4 header; without a link header the IPv4 header starts at 0.
    bytes: [u8; ETH + IP],
    /// 14 with an Ethernet header, 0 without, `u8::MAX` while nothing is captured.
    link: u8,
    /// Sum of the IPv4 header's 16-bit words with total length, identification and
    /// checksum taken as zero.
    sum: u32,
}

impl Prebuilt {
    /// Nothing captured yet: these headers fit no packet.
    pub const EMPTY: Prebuilt = Prebuilt { bytes: [0; ETH + IP], link: u8::MAX, sum: 0 };

    /// Keep `hdr`, the link header (`link` bytes, 0 or 14) and the 20-byte IPv4 header just
    /// written for a frame.
    pub(super) fn capture(hdr: &[u8], link: usize) -> Prebuilt {
        let mut p = Prebuilt { bytes: [0; ETH + IP], link: link as u8, sum: 0 };
        let n = link + IP;
        if hdr.len() < n || !(link == 0 || link == ETH) {
            return Prebuilt::EMPTY;
        }
        p.bytes[..n].copy_from_slice(&hdr[..n]);
        let ip = &mut p.bytes[link..n];
        // The words that change from frame to frame count as zero.
        let mut words = [0u8; IP];
        words.copy_from_slice(ip);
        words[2..6].fill(0);
        words[10..12].fill(0);
        p.sum = words.chunks_exact(2).map(|w| u16::from_be_bytes([w[0], w[1]]) as u32).sum();
        p
    }

    /// Whether these headers are those of an IPv4 packet from `src` to `dst` carrying
    /// `protocol`.
    #[inline]
    pub(super) fn fits(&self, src: Ipv4Addr, dst: Ipv4Addr, protocol: u8) -> bool {
        let l = self.link as usize;
        if l != 0 && l != ETH {
            return false;
        }
        let ip = &self.bytes[l..l + IP];
        ip[9] == protocol && ip[12..16] == src.octets() && ip[16..20] == dst.octets()
    }

    /// Prepend the headers to `data` (the IP payload, whose length is `payload` bytes)
    /// with this total length and identification. `out` is the headroom just claimed:
    /// [`len`](Self::len) bytes.
    #[inline(always)]
    pub fn write(&self, out: &mut [u8], payload: usize, ident: u16) {
        let total = (IP + payload) as u16;
        let csum = !checksum::fold(self.sum as u64 + total as u64 + ident as u64);
        let ip = if self.link as usize == ETH {
            let Some(out) = out.get_mut(..ETH + IP) else { return };
            out.copy_from_slice(&self.bytes);
            &mut out[ETH..]
        } else {
            let Some(out) = out.get_mut(..IP) else { return };
            out.copy_from_slice(&self.bytes[..IP]);
            out
        };
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&ident.to_be_bytes());
        ip[10..12].copy_from_slice(&csum.to_be_bytes());
    }

    /// Bytes [`write`](Self::write) prepends.
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.link as usize + IP
    }
}
