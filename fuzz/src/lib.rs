//! What the fuzz targets share: the broker's allocator, sealing batch CRCs (so the fuzzer reaches past the CRC
//! check into headers and records) and splitting one input into several files.

use brook_storage::batch::{seal_crc, BatchHeader};

/// The broker's allocator: kafka-protocol reserves an array's claimed length before reading
/// it, which the broker's allocator absorbs (`brook_protocol::alloc`) and the system one
/// answers by aborting. The targets decode as the broker does.
#[global_allocator]
static ALLOCATOR: brook_protocol::alloc::BrookAllocator = brook_protocol::alloc::BrookAllocator;

/// Recomputes the CRC-32C of every whole batch at the front of `buf`, in place, stopping at
/// the first header that does not parse or batch that does not fit.
pub fn seal_batches(buf: &mut [u8]) {
    let mut position = 0usize;
    while let Some(rest) = buf.get_mut(position..) {
        let Ok(header) = BatchHeader::parse(rest) else {
            return;
        };
        let Some(batch) = rest.get_mut(..header.size()) else {
            return;
        };
        seal_crc(batch);
        position += header.size();
    }
}

/// Splits `data` into `n` parts, each prefixed by its length as a big-endian u16 (the last
/// part takes what is left); missing parts are empty.
pub fn split_parts(mut data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        if i + 1 == n {
            parts.push(data);
            break;
        }
        let len = match data {
            [a, b, rest @ ..] => {
                data = rest;
                usize::from(u16::from_be_bytes([*a, *b]))
            }
            _ => {
                data = &[];
                0
            }
        };
        let (part, rest) = data.split_at(len.min(data.len()));
        parts.push(part);
        data = rest;
    }
    parts
}

/// The inverse of [`split_parts`], for building seeds.
pub fn join_parts(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 < parts.len() {
            let len = u16::try_from(part.len()).expect("a seed part fits u16");
            out.extend_from_slice(&len.to_be_bytes());
        }
        out.extend_from_slice(part);
    }
    out
}
