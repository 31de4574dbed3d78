// Compression codecs for kafkajs, which ships only gzip.
//
// - snappy: kafkajs-snappy (pure JS, snappyjs; reads the xerial framing the
//   Java client writes).
// - lz4: kafkajs-lz4 (the `lz4` package; native, built by node-gyp against
//   the system Node headers at `npm ci`). LZ4 frame format, as KIP-57 fixed.
// - zstd: zstd-codec (the reference zstd compiled to JS by Emscripten, no
//   native build). Decompression uses its streaming API because the Java
//   client's streaming compressor writes frames without a content size,
//   which the "simple" API cannot decode.
//
// register() must run (and be awaited) before any producer or consumer is
// created: the zstd module initialises asynchronously.
'use strict'

const { CompressionTypes, CompressionCodecs } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('kafkajs-lz4')
const { ZstdCodec } = require('zstd-codec')

// Kafka's default zstd level (compression.zstd.level, KIP-390).
const ZSTD_LEVEL = 3

function loadZstd() {
  return new Promise(resolve => ZstdCodec.run(zstd => resolve(zstd)))
}

async function register() {
  CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
  CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
  const zstd = await loadZstd()
  const simple = new zstd.Simple()
  const streaming = new zstd.Streaming()
  CompressionCodecs[CompressionTypes.ZSTD] = () => ({
    async compress(encoder) {
      const out = simple.compress(new Uint8Array(encoder.buffer), ZSTD_LEVEL)
      if (out == null) throw new Error('zstd compression failed')
      return Buffer.from(out)
    },
    async decompress(buffer) {
      const out = streaming.decompress(new Uint8Array(buffer))
      if (out == null) throw new Error('zstd decompression failed')
      return Buffer.from(out)
    },
  })
}

// The protocol's --codec names mapped to kafkajs' compression types.
const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

module.exports = { register, CODECS }
