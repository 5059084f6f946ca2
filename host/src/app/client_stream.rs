//! A client's TCP stream as the server reads and writes it: the first bytes read to tell
//! HTTP/2 from HTTP/1 are given back, and an answer that a client takes too little of is cut
//! off (the stall timer).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// A client's TCP stream: gives back the bytes read to tell the protocol, and fails the
/// answer's writes once they have waited `stall` on a client that took less than
/// `PROGRESS_BYTES` of them meanwhile (one that reads a byte now and then holds the
/// connection no longer than one that reads nothing).
pub(super) struct ClientStream {
    tcp: TcpStream,
    first_bytes: Vec<u8>,
    given_back: usize,
    stall: Duration,
    stalled: Option<Stall>,
}

/// Since a write first had to wait: its deadline, and the bytes the client took since.
struct Stall {
    deadline: Pin<Box<Sleep>>,
    taken: usize,
}

/// What a client must take of an answer, per `stall`, to keep the connection.
const PROGRESS_BYTES: usize = 1024;

/// What an HTTP/2 client with prior knowledge sends first.
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl ClientStream {
    pub(super) fn new(tcp: TcpStream, stall: Duration) -> ClientStream {
        ClientStream {
            tcp,
            first_bytes: Vec::new(),
            given_back: 0,
            stall,
            stalled: None,
        }
    }

    /// Reads the first bytes, no more than the HTTP/2 preface, to tell the protocol; they are
    /// read again by whoever reads next.
    pub(super) async fn starts_http2(&mut self) -> io::Result<bool> {
        let mut buffer = [0u8; HTTP2_PREFACE.len()];
        let mut seen = 0;
        loop {
            let read = self.tcp.read(&mut buffer[seen..]).await?;
            if read == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            seen += read;
            if !HTTP2_PREFACE.starts_with(&buffer[..seen]) || seen == HTTP2_PREFACE.len() {
                self.first_bytes = buffer[..seen].to_vec();
                return Ok(seen == HTTP2_PREFACE.len() && buffer == HTTP2_PREFACE);
            }
        }
    }

    /// A write the client is not taking: pending until `stall` has passed, then failed.
    fn poll_stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let stall = self.stall;
        let since = self.stalled.get_or_insert_with(|| Stall {
            deadline: Box::pin(tokio::time::sleep(stall)),
            taken: 0,
        });
        match since.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client took under {PROGRESS_BYTES} bytes of the answer in {} s",
                    stall.as_secs()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// A write's outcome, `taken`: how many bytes it wrote.
    fn progressed<T>(
        &mut self,
        poll: Poll<io::Result<T>>,
        taken: impl FnOnce(&T) -> usize,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(Ok(done)) => {
                if let Some(stall) = &mut self.stalled {
                    stall.taken += taken(&done);
                    if stall.taken >= PROGRESS_BYTES {
                        self.stalled = None;
                    }
                }
                Poll::Ready(Ok(done))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => self.poll_stalled(cx),
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.given_back < this.first_bytes.len() {
            let rest = &this.first_bytes[this.given_back..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.given_back += n;
            if this.given_back == this.first_bytes.len() {
                this.first_bytes = Vec::new();
                this.given_back = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.progressed(poll, |n| *n, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.progressed(poll, |n| *n, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.tcp).poll_flush(cx);
        self.progressed(poll, |()| 0, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.tcp).poll_shutdown(cx);
        self.progressed(poll, |()| 0, cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::net::TcpListener;

    use super::*;

    /// A pair of connected streams whose reading end takes little at a time (small buffers),
    /// the writing end wrapped as the server wraps a client.
    async fn slow_pair(stall: Duration) -> (ClientStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpSocket::new_v4().unwrap();
        client.set_recv_buffer_size(4096).unwrap();
        let connecting = client.connect(listener.local_addr().unwrap());
        let (accepted, connected) = tokio::join!(listener.accept(), connecting);
        let (server, _) = accepted.unwrap();
        (ClientStream::new(server, stall), connected.unwrap())
    }

    /// Writes an answer far larger than the buffers; how that ended.
    async fn write_answer(stream: &mut ClientStream) -> io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..256 {
            stream.write_all(&chunk).await?;
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_client_that_takes_too_little_of_an_answer_is_cut_off() {
        let stall = Duration::from_millis(300);
        // Reads nothing.
        let (mut server, _idle) = slow_pair(stall).await;
        let started = Instant::now();
        let err = write_answer(&mut server).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(5));

        // Reads a byte every 50 ms: under 1 KiB per stall, cut off all the same.
        let (mut server, mut trickling) = slow_pair(stall).await;
        let reader = tokio::spawn(async move {
            let mut byte = [0u8; 1];
            while trickling.read(&mut byte).await.is_ok_and(|n| n > 0) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let err = write_answer(&mut server).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        reader.abort();

        // Reads as fast as it can: the whole answer goes through.
        let (mut server, mut reading) = slow_pair(stall).await;
        let reader = tokio::spawn(async move {
            let mut buffer = vec![0u8; 64 * 1024];
            let mut total = 0;
            while let Ok(n) = reading.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                total += n;
            }
            total
        });
        write_answer(&mut server).await.unwrap();
        drop(server);
        assert_eq!(reader.await.unwrap(), 256 * 64 * 1024);
    }
}
