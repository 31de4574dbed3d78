//! Two protocols on the controller listener: the raft peer RPC of this crate and the Kafka
//! requests Kafka's tools send with `--bootstrap-controller` (ApiVersions, DescribeQuorum,
//! DescribeCluster, AddRaftVoter, …), told apart by the first frame.
//!
//! Both frame with a 4-byte big-endian length. A Kafka request body starts with its header's
//! `request_api_key`, a big-endian i16; every Kafka API key is below 256, so that first byte
//! is always 0x00. A peer-RPC body is serde_json of an externally tagged enum: `{` for a
//! variant with data, `"` for a unit one (`"LeaderMetrics"`), never a NUL byte (JSON text is
//! printable). The fifth byte of the connection therefore decides, with no overlap: 0x00 is
//! Kafka, anything else raft; after TLS (when the listener is SSL) the decrypted bytes are
//! looked at, so both protocols get the listener's TLS as today. Nothing is consumed: the
//! five bytes are replayed to whichever side serves the connection ([`Prefixed`]). On a SASL
//! listener the login comes first (`sasl.rs`) and the same decision is made on the frame
//! after it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::tls::PeerStream;

/// Bytes read before deciding: the length prefix and the first body byte.
pub const HEAD_LEN: usize = 5;

/// Serves a Kafka connection on the controller listener; given the stream (its first
/// [`HEAD_LEN`] bytes replayed), the peer's address, its TLS client certificate (DER) and,
/// on a SASL listener, the user it logged in as (`sasl.rs`).
pub type KafkaHandler = Arc<
    dyn Fn(
            PeerStream,
            SocketAddr,
            Option<Vec<u8>>,
            Option<String>,
        ) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// Set once by the broker after it has started; until then Kafka connections are closed.
pub type KafkaHandlerSlot = Arc<OnceLock<KafkaHandler>>;

/// What the first frame is.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstFrame {
    Raft,
    Kafka,
}

/// Decides from the connection's first [`HEAD_LEN`] bytes.
pub fn classify(head: &[u8; HEAD_LEN]) -> FirstFrame {
    if head[4] == 0 {
        FirstFrame::Kafka
    } else {
        FirstFrame::Raft
    }
}

/// Reads the head of `stream` and returns the decision with the stream, head replayed.
/// `Ok(None)`: the peer closed before sending a whole head (a reachability probe).
pub async fn sniff(mut stream: PeerStream) -> io::Result<Option<(FirstFrame, PeerStream)>> {
    let mut head = [0u8; HEAD_LEN];
    match stream.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let kind = classify(&head);
    Ok(Some((
        kind,
        Box::new(Prefixed {
            head,
            at: 0,
            inner: stream,
        }),
    )))
}

/// A stream whose first bytes are replayed from `head`.
struct Prefixed {
    head: [u8; HEAD_LEN],
    at: usize,
    inner: PeerStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < HEAD_LEN {
            let n = (HEAD_LEN - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.head[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{write_frame, RpcRequest};

    #[tokio::test]
    async fn raft_frames_and_kafka_requests_are_told_apart_and_replayed_whole() {
        let mut raft = Vec::new();
        write_frame(&mut raft, &RpcRequest::LeaderMetrics)
            .await
            .expect("frame");
        let mut attach = Vec::new();
        write_frame(
            &mut attach,
            &RpcRequest::Attach {
                broker_id: 1,
                broker_epoch: 2,
            },
        )
        .await
        .expect("frame");
        // ApiVersions v3, correlation id 7: size, api key 18, version 3, …
        let kafka: Vec<u8> = vec![0, 0, 0, 10, 0, 18, 0, 3, 0, 0, 0, 7, 0, 0];
        for (bytes, want) in [
            (raft, FirstFrame::Raft),
            (attach, FirstFrame::Raft),
            (kafka, FirstFrame::Kafka),
        ] {
            let stream: PeerStream = Box::new(Cursorish(std::io::Cursor::new(bytes.clone())));
            let (kind, mut replayed) = sniff(stream).await.expect("read").expect("head");
            assert_eq!(kind, want);
            let mut back = Vec::new();
            replayed.read_to_end(&mut back).await.expect("replay");
            assert_eq!(back, bytes);
        }
        let short: PeerStream = Box::new(Cursorish(std::io::Cursor::new(vec![0, 0])));
        assert!(sniff(short).await.expect("eof").is_none());
    }

    /// An in-memory stream for the test.
    struct Cursorish(std::io::Cursor<Vec<u8>>);

    impl AsyncRead for Cursorish {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Cursorish {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }
}
