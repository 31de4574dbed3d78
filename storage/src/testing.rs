//! Test helper: encodes magic v2 record batches with real records (varint encoding) and
//! a correct CRC-32C. Public so that integration tests and other crates' tests can build
//! batches; the production path never encodes records.

/// One record of a test batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp_delta: i64,
}

/// The header fields a test may want to set, plus the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestBatch {
    pub base_offset: i64,
    pub base_timestamp: i64,
    pub attributes: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records: Vec<TestRecord>,
}

impl TestBatch {
    /// A non-idempotent CreateTime batch with one record per value, timestamps
    /// `base_timestamp + index`.
    pub fn values(base_timestamp: i64, values: &[&[u8]]) -> Self {
        TestBatch {
            base_offset: 0,
            base_timestamp,
            attributes: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records: values
                .iter()
                .enumerate()
                .map(|(i, v)| TestRecord {
                    key: None,
                    value: Some(v.to_vec()),
                    timestamp_delta: i as i64,
                })
                .collect(),
        }
    }

    /// `count` records of `value_len` bytes each.
    pub fn sized(base_timestamp: i64, count: usize, value_len: usize) -> Self {
        let value = vec![b'x'; value_len];
        let values: Vec<&[u8]> = (0..count).map(|_| value.as_slice()).collect();
        Self::values(base_timestamp, &values)
    }

    /// Makes the batch idempotent.
    pub fn with_producer(
        mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }
}

impl TestBatch {
    /// Makes the batch transactional (attribute bit 4) from `producer_id` / `epoch`,
    /// starting at `base_sequence`.
    pub fn transactional(self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        let mut batch = self.with_producer(producer_id, producer_epoch, base_sequence);
        batch.attributes |= 0x10;
        batch
    }

    /// A transaction marker as the coordinator writes it (KIP-98): a control batch
    /// (transactional | control) of one record, key = version 0 + type, value = version
    /// 0 + coordinator epoch, base sequence -1.
    pub fn marker(
        producer_id: i64,
        producer_epoch: i16,
        control_type: crate::control::ControlType,
        coordinator_epoch: i32,
    ) -> Self {
        let kind: i16 = match control_type {
            crate::control::ControlType::Abort => 0,
            crate::control::ControlType::Commit => 1,
        };
        let mut key = 0i16.to_be_bytes().to_vec();
        key.extend_from_slice(&kind.to_be_bytes());
        let mut value = 0i16.to_be_bytes().to_vec();
        value.extend_from_slice(&coordinator_epoch.to_be_bytes());
        TestBatch {
            base_offset: 0,
            base_timestamp: 0,
            attributes: 0x10 | 0x20,
            producer_id,
            producer_epoch,
            base_sequence: -1,
            records: vec![TestRecord {
                key: Some(key),
                value: Some(value),
                timestamp_delta: 0,
            }],
        }
    }
}

fn put_varlong(out: &mut Vec<u8>, value: i64) {
    // Zig-zag then base-128, as Kafka's ByteUtils.writeVarlong.
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// Encodes `batch` as a complete v2 batch with a valid CRC.
pub fn encode_batch(batch: &TestBatch) -> Vec<u8> {
    let mut records = Vec::new();
    let mut max_delta = 0i64;
    for (i, r) in batch.records.iter().enumerate() {
        let mut body = vec![0u8]; // record attributes
        put_varlong(&mut body, r.timestamp_delta);
        put_varlong(&mut body, i as i64);
        put_bytes(&mut body, r.key.as_deref());
        put_bytes(&mut body, r.value.as_deref());
        put_varlong(&mut body, 0); // no headers
        put_varlong(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
        max_delta = max_delta.max(r.timestamp_delta);
    }
    let count = batch.records.len() as i32;
    let mut out = Vec::with_capacity(61 + records.len());
    out.extend_from_slice(&batch.base_offset.to_be_bytes());
    out.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend_from_slice(&[0u8; 4]); // crc placeholder
    out.extend_from_slice(&batch.attributes.to_be_bytes());
    out.extend_from_slice(&(count - 1).max(0).to_be_bytes());
    out.extend_from_slice(&batch.base_timestamp.to_be_bytes());
    out.extend_from_slice(&(batch.base_timestamp + max_delta).to_be_bytes());
    out.extend_from_slice(&batch.producer_id.to_be_bytes());
    out.extend_from_slice(&batch.producer_epoch.to_be_bytes());
    out.extend_from_slice(&batch.base_sequence.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&records);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}
