//! What every view shares: unwrapping the buffer, and reading and writing the big-endian
//! fields and IPv4 addresses that the format's accessors are built from.
//!
//! [`view_buffer!`] adds these to a view struct with a private `buffer: T` field. The
//! readers are private and only the ones a format uses are called, so each carries
//! `#[allow(dead_code)]`.

/// Adds `into_inner` and the private big-endian field helpers (`read_u16`, `read_ipv4`,
/// `write_u16`) to a view `$view<T>` whose bytes are in a field `buffer: T`.
macro_rules! view_buffer {
    ($view:ident) => {
        impl<T: AsRef<[u8]>> $view<T> {
            /// Unwrap the buffer.
            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The big-endian `u16` at `range` (two bytes).
            #[inline]
            #[allow(dead_code)]
            fn read_u16(&self, range: core::ops::Range<usize>) -> u16 {
                let d = &self.buffer.as_ref()[range];
                u16::from_be_bytes([d[0], d[1]])
            }

            /// The IPv4 address at `range` (four bytes).
            #[inline]
            #[allow(dead_code)]
            fn read_ipv4(&self, range: core::ops::Range<usize>) -> core::net::Ipv4Addr {
                let d = &self.buffer.as_ref()[range];
                core::net::Ipv4Addr::new(d[0], d[1], d[2], d[3])
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            /// Store `value` big-endian at `range` (two bytes).
            #[inline]
            #[allow(dead_code)]
            fn write_u16(&mut self, range: core::ops::Range<usize>, value: u16) {
                self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
            }
        }
    };
}
