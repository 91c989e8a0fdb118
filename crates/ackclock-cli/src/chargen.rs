//! The character generator stream of RFC 864, which `serve` sends on port 19 and `ttcp`
//! transfers: lines of 72 characters from the 95 printable ASCII characters, each line
//! starting one character later than the one before, ended by CR LF. The stream repeats
//! every 95 lines.

/// Characters per line, before the CR LF.
pub const LINE: usize = 72;
/// The stream's period in bytes: 95 lines with their CR LF.
pub const PERIOD: usize = 95 * (LINE + 2);

/// The stream, laid out so that `chunk` bytes from any offset are contiguous: one period
/// and then `chunk` bytes more.
pub struct Chargen {
    bytes: Vec<u8>,
    chunk: usize,
}

impl Chargen {
    /// The stream for reads of at most `chunk` bytes.
    pub fn new(chunk: usize) -> Chargen {
        Chargen { bytes: pattern(PERIOD + chunk), chunk }
    }

    /// Up to `chunk` bytes of the stream from offset `off`: `len` of them if it is smaller.
    pub fn at(&self, off: u64, len: usize) -> &[u8] {
        let start = (off % PERIOD as u64) as usize;
        &self.bytes[start..start + len.min(self.chunk)]
    }
}

/// The first `len` bytes of the stream.
fn pattern(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + LINE + 2);
    let mut line = 0;
    while out.len() < len {
        out.extend((0..LINE).map(|i| b' ' + ((line + i) % 95) as u8));
        out.extend_from_slice(b"\r\n");
        line += 1;
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chargen_is_rfc864() {
        let c = pattern(2 * 74);
        assert_eq!(&c[..3], b" !\"");
        assert_eq!(&c[72..74], b"\r\n");
        assert_eq!(c[74], b'!');
        let whole = pattern(PERIOD + 74);
        assert_eq!(whole[..74], whole[PERIOD..], "repeats after 95 lines");
    }
}
