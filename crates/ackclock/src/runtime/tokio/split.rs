//! A [`TcpStream`] in two halves, as tokio's `TcpStream::split` and `into_split` make them:
//! one task reads while another writes, each through its own half.
//!
//! The halves need no lock of their own: the stream already reads and writes through a
//! shared reference (`AsyncRead for &TcpStream`), and its waiters keep the reading and the
//! writing task's wakers apart. The owned halves share the stream through an `Arc`; the
//! connection is closed (as `close(2)`) when both are gone.

use super::TcpStream;
use ::tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

impl TcpStream {
    /// Borrow the stream as a read half and a write half (tokio's `TcpStream::split`).
    /// Dropping the halves does nothing; shutting the write half down half-closes the
    /// connection.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// Split the stream into halves that own it (tokio's `TcpStream::into_split`), to move
    /// into two tasks. Dropping the write half half-closes the connection (a FIN after the
    /// data written), as tokio's does, unless [`OwnedWriteHalf::forget`] was called; the
    /// connection is closed when both halves are dropped.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let stream = Arc::new(self);
        (OwnedReadHalf { stream: stream.clone() }, OwnedWriteHalf { stream, shutdown_on_drop: true })
    }
}

/// The reading half of [`TcpStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The writing half of [`TcpStream::split`].
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

/// The reading half of [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    stream: Arc<TcpStream>,
}

/// The writing half of [`TcpStream::into_split`]. Dropping it half-closes the connection.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    stream: Arc<TcpStream>,
    shutdown_on_drop: bool,
}

/// Two halves of different streams given to [`OwnedReadHalf::reunite`]; they are given back.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves that are not from the same socket")
    }
}

impl std::error::Error for ReuniteError {}

impl OwnedReadHalf {
    /// The stream again, from its two halves; [`ReuniteError`] if they are not one
    /// stream's. The write half's shutdown on drop does not happen.
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if !Arc::ptr_eq(&self.stream, &other.stream) {
            return Err(ReuniteError(self, other));
        }
        let mut other = other;
        other.shutdown_on_drop = false;
        drop(other);
        // The write half is gone: this is the last reference.
        Ok(Arc::try_unwrap(self.stream).expect("the two halves held the only references"))
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// Wait until a read would not block ([`TcpStream::readable`]).
    pub async fn readable(&self) -> io::Result<()> {
        self.stream.readable().await
    }

    /// Read what is there now, without waiting ([`TcpStream::try_read`]).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.try_read(buf)
    }
}

impl OwnedWriteHalf {
    /// Drop this half without half-closing the connection (tokio's `forget`).
    pub fn forget(mut self) {
        self.shutdown_on_drop = false;
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// Wait until a write would not block ([`TcpStream::writable`]).
    pub async fn writable(&self) -> io::Result<()> {
        self.stream.writable().await
    }

    /// Queue what fits now, without waiting ([`TcpStream::try_write`]).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.stream.try_write(buf)
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // As tokio: errors (a connection already over) are ignored.
            let _ = self.stream.inner.shutdown(std::net::Shutdown::Write);
        }
    }
}

impl AsRef<TcpStream> for ReadHalf<'_> {
    fn as_ref(&self) -> &TcpStream {
        self.0
    }
}

impl AsRef<TcpStream> for WriteHalf<'_> {
    fn as_ref(&self) -> &TcpStream {
        self.0
    }
}

impl AsRef<TcpStream> for OwnedReadHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.stream
    }
}

impl AsRef<TcpStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.stream
    }
}

fn read(s: &TcpStream, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
    Pin::new(&mut &*s).poll_read(cx, buf)
}

fn write(s: &TcpStream, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
    Pin::new(&mut &*s).poll_write(cx, buf)
}

fn shutdown(s: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    Pin::new(&mut &*s).poll_shutdown(cx)
}

impl AsyncRead for ReadHalf<'_> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        read(self.0, cx, buf)
    }
}

impl AsyncRead for OwnedReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        read(&self.stream, cx, buf)
    }
}

impl AsyncWrite for WriteHalf<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        write(self.0, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        shutdown(self.0, cx)
    }
}

impl AsyncWrite for OwnedWriteHalf {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        write(&self.stream, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        shutdown(&self.stream, cx)
    }
}
