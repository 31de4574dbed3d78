// The offsets command through kafkajs admin: earliest/latest via
// fetchTopicOffsets (low / high watermark), a timestamp via
// fetchTopicOffsetsByTimestamp.
//
// Client quirks the harness must know: kafkajs never returns the
// ListOffsets timestamp, so "timestamp" is -1 for earliest/latest (what the
// broker sends) and null for a timestamp spec (the broker's value is
// dropped by kafkajs). For a timestamp with no record at or after it, kafkajs
// substitutes the high watermark for the broker's -1. max-timestamp
// (ListOffsets v7, KIP-734) is beyond kafkajs' ListOffsets versions:
// unsupported.
'use strict'

const { UsageError, Unsupported, required, print } = require('./util')

async function offsets(admin, o) {
  required(o, 'topic', 'spec')
  const out = {}
  if (o.spec === 'earliest' || o.spec === 'latest') {
    const list = await admin.fetchTopicOffsets(o.topic)
    for (const p of list) {
      out[String(p.partition)] = { offset: Number(o.spec === 'earliest' ? p.low : p.high), timestamp: -1 }
    }
  } else if (o.spec === 'max-timestamp') {
    throw new Unsupported('kafkajs ListOffsets stops before v7: no max-timestamp (KIP-734)')
  } else {
    const ts = Number(o.spec)
    if (!Number.isInteger(ts) || ts < 0) throw new UsageError(`bad --spec ${o.spec}`)
    const list = await admin.fetchTopicOffsetsByTimestamp(o.topic, ts)
    for (const p of list) out[String(p.partition)] = { offset: Number(p.offset), timestamp: null }
  }
  print(out)
}

module.exports = { offsets }
