//! What the crate's process tests share: `brook` nodes spawned on loopback ports (one
//! node or a three-controller cluster), polling with a deadline, one Kafka request on a
//! fresh connection, and a one-record Produce. Each test binary uses part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// One `brook` process: its node id, client port and `--override` arguments.
pub struct Node {
    pub id: i32,
    pub port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl Node {
    /// A node started with `settings` (each `key=value`) as overrides.
    pub fn new(id: i32, port: u16, settings: &[String]) -> Node {
        Node {
            id,
            port,
            args: settings
                .iter()
                .flat_map(|s| ["--override".to_string(), s.clone()])
                .collect(),
            child: None,
        }
    }

    /// Spawns the process without waiting for it to listen.
    pub fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_brook"))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn brook");
        self.child = Some(child);
    }

    /// Spawns the process and waits until its client listener accepts connections.
    pub fn start(&mut self) {
        self.spawn();
        self.wait_listening();
    }

    pub fn wait_listening(&self) {
        wait_until("the client listener", || {
            TcpStream::connect(self.bootstrap()).ok()
        });
    }

    /// SIGTERM (a controlled shutdown), then wait for the exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `kill(1)` rather than libc keeps the tests free of `unsafe`.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port for a node, bound by it a moment later. A port from the kernel's ephemeral range
/// (32768+) could meanwhile become some client's local port (a loaded machine made two nodes
/// here miss their listeners), so these come from 10000-10999: below that range, and apart
/// from the raft crate's tests (11000-11999) and the Python suite (12000-31999). Handed out in
/// turn from a start that differs per process, skipping any that cannot be bound now.
pub fn free_port() -> u16 {
    const FIRST: u32 = 10_000;
    const COUNT: u32 = 1_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
        ^ std::process::id();
    let _ = NEXT.compare_exchange(u32::MAX, seed % COUNT, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..COUNT {
        let port = FIRST + NEXT.fetch_add(1, Ordering::SeqCst) % COUNT;
        let port = u16::try_from(port).expect("below 65536");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}-{}", FIRST + COUNT - 1)
}

/// Three combined nodes (ids 1-3) on one quorum, plus `broker_only` nodes (ids 4…) that
/// follow it as learners; `extra` settings go to every node.
pub fn cluster(dir: &Path, broker_only: i32, extra: &[&str]) -> Vec<Node> {
    let controllers: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let voters = controllers
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    (1..=3 + broker_only)
        .map(|id| {
            let port = free_port();
            let (roles, listeners) = match controllers.get(id as usize - 1) {
                Some(controller) => (
                    "broker,controller",
                    format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"),
                ),
                None => ("broker", format!("PLAINTEXT://127.0.0.1:{port}")),
            };
            let settings: Vec<String> = [
                format!("node.id={id}"),
                format!("process.roles={roles}"),
                format!("controller.quorum.voters={voters}"),
                format!("listeners={listeners}"),
                "controller.listener.names=CONTROLLER".to_string(),
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
                    .to_string(),
                format!("log.dirs={}", dir.join(format!("node-{id}")).display()),
                "metrics.listener=".to_string(),
                "broker.heartbeat.interval.ms=500".to_string(),
            ]
            .into_iter()
            .chain(extra.iter().map(|s| s.to_string()))
            .collect();
            Node::new(id, port, &settings)
        })
        .collect()
}

/// Polls `probe` every 100 ms until it gives a value; fails the test after 60 s.
pub fn wait_until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(100));
    }
}

/// One request, one response, on a fresh connection.
pub fn try_call<Req: Encodable + HeaderVersion, Resp: Decodable + HeaderVersion>(
    bootstrap: &str,
    api: ApiKey,
    version: i16,
    request: &Req,
) -> std::io::Result<Resp> {
    let mut stream = TcpStream::connect(bootstrap)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("brook-process-test")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, Req::header_version(version))
        .map_err(std::io::Error::other)?;
    request
        .encode(&mut body, version)
        .map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
    stream.write_all(&len.to_be_bytes())?;
    stream.write_all(&body)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut frame)?;
    let mut frame = Bytes::from(frame);
    ResponseHeader::decode(&mut frame, Resp::header_version(version))
        .map_err(std::io::Error::other)?;
    Resp::decode(&mut frame, version).map_err(std::io::Error::other)
}

/// One record (`k` → `v`) as a client's v2 batch; transactional for `producer` = (producer
/// id, epoch, sequence), else without a producer.
pub fn one_record_batch(producer: Option<(i64, i16, i32)>) -> Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let (producer_id, producer_epoch, sequence) = producer.unwrap_or((-1, -1, -1));
    let record = Record {
        transactional: producer.is_some(),
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &[record], &options).expect("encode batch");
    buf.freeze()
}

/// An acks=all Produce of `records` to `topic`-`partition`.
pub fn produce_request(
    topic: &'static str,
    partition: i32,
    records: Bytes,
) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}
