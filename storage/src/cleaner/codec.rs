//! Decompressing and recompressing batch payloads for the cleaner, with the codecs
//! Kafka uses: gzip, snappy (Kafka's Java client frames it the xerial way; librdkafka
//! may send raw snappy — both are read, xerial is written), lz4 (frame format), zstd.
//!
//! Pure CPU work: callers run it on a blocking thread. Decompression is bounded by
//! `limit` bytes so a hostile batch cannot exhaust memory; any failure yields `None`
//! and the caller keeps the batch untouched.

use std::io::{Read, Write};

use crate::batch::Compression;

/// xerial's snappy stream header: magic, then version and compatible version (i32 BE).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
/// xerial's default block size (the Java client's `SnappyOutputStream`).
const XERIAL_BLOCK: usize = 32 * 1024;
/// The lz4 level kafka-protocol uses (Kafka's default is 9 for HC; any level decodes).
const LZ4_LEVEL: u32 = 4;
/// Kafka's default `compression.zstd.level`.
const ZSTD_LEVEL: i32 = 3;

/// Reads `reader` to the end, failing past `limit` bytes.
fn read_bounded(reader: impl Read, limit: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    reader.take(limit as u64 + 1).read_to_end(&mut out).ok()?;
    (out.len() <= limit).then_some(out)
}

/// The uncompressed payload of a batch compressed with `codec`.
pub(crate) fn decompress(codec: Compression, data: &[u8], limit: usize) -> Option<Vec<u8>> {
    match codec {
        Compression::None => Some(data.to_vec()),
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(data), limit),
        Compression::Snappy => snappy_decompress(data, limit),
        Compression::Lz4 => read_bounded(lz4::Decoder::new(data).ok()?, limit),
        Compression::Zstd => read_bounded(zstd::stream::read::Decoder::new(data).ok()?, limit),
        Compression::Unknown(_) => None,
    }
}

fn snappy_decompress(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    let raw_len = |block: &[u8]| snap::raw::decompress_len(block).ok();
    if !data.starts_with(&XERIAL_MAGIC) {
        if raw_len(data)? > limit {
            return None;
        }
        return snap::raw::Decoder::new().decompress_vec(data).ok();
    }
    let mut out = Vec::new();
    let mut pos = XERIAL_HEADER_LEN;
    let mut decoder = snap::raw::Decoder::new();
    while pos < data.len() {
        let len_bytes: [u8; 4] = data.get(pos..pos + 4)?.try_into().ok()?;
        let len = usize::try_from(i32::from_be_bytes(len_bytes)).ok()?;
        pos += 4;
        let block = data.get(pos..pos.checked_add(len)?)?;
        pos += len;
        if out.len() + raw_len(block)? > limit {
            return None;
        }
        out.extend_from_slice(&decoder.decompress_vec(block).ok()?);
    }
    Some(out)
}

/// `data` compressed with `codec`.
pub(crate) fn compress(codec: Compression, data: &[u8]) -> Option<Vec<u8>> {
    match codec {
        Compression::None => Some(data.to_vec()),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(data).ok()?;
            encoder.finish().ok()
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(data.len() / 2 + XERIAL_HEADER_LEN);
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK) {
                let block = encoder.compress_vec(chunk).ok()?;
                out.extend_from_slice(&i32::try_from(block.len()).ok()?.to_be_bytes());
                out.extend_from_slice(&block);
            }
            Some(out)
        }
        Compression::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .level(LZ4_LEVEL)
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())
                .ok()?;
            encoder.write_all(data).ok()?;
            let (out, result) = encoder.finish();
            result.ok().map(|()| out)
        }
        Compression::Zstd => zstd::stream::encode_all(data, ZSTD_LEVEL).ok(),
        Compression::Unknown(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in CODECS {
            let packed = compress(codec, &data).expect("compress");
            assert_eq!(
                decompress(codec, &packed, 1 << 20).as_deref(),
                Some(data.as_slice()),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn raw_snappy_is_read_too() {
        let data = b"raw snappy as librdkafka writes it".repeat(10);
        let raw = snap::raw::Encoder::new()
            .compress_vec(&data)
            .expect("compress");
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 20),
            Some(data.clone())
        );
    }

    #[test]
    fn output_past_the_limit_or_garbage_gives_none() {
        let data = vec![7u8; 10_000];
        for codec in CODECS.into_iter().skip(1) {
            let packed = compress(codec, &data).expect("compress");
            assert_eq!(decompress(codec, &packed, 9_999), None, "{codec:?}");
            assert_eq!(decompress(codec, b"garbage!", 1 << 20), None, "{codec:?}");
        }
        assert_eq!(decompress(Compression::Unknown(6), b"x", 10), None);
    }
}
