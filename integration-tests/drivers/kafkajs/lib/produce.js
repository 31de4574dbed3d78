// The produce command: reads JSON-lines records, sends them with one
// producer.send() and prints one {"partition","offset"} line per input
// record, in input order.
//
// kafkajs answers a send with one base offset per partition, and puts each
// partition's messages in one batch in input order, so a record's offset is
// its partition's base offset plus its index among that partition's
// messages. The partition a record went to is learned by wrapping the
// default partitioner (kafkajs passes the caller's message objects to it).
//
// Client quirks: headers are a JS object in kafkajs, so headers are grouped
// by key (a repeated key becomes an array and keeps its values' order, but
// interleaved keys are regrouped); kafkajs cannot send a null header value
// (unsupported, exit 3), though it reads them.
// kafkajs has no client-side max.request.size, so --max-request-size is accepted
// and has nothing to raise: any size goes to the broker, which enforces its limit.
'use strict'

const fs = require('fs')
const { Partitioners } = require('kafkajs')
const { CODECS } = require('./codecs')
const { UsageError, Unsupported, required, int, print, errorDoc } = require('./util')

const ACKS = { all: -1, '-1': -1, 1: 1, 0: 0 }

function readInput(path) {
  const lines = fs.readFileSync(path, 'utf8').split('\n')
  const out = []
  lines.forEach((line, i) => {
    if (line.trim() === '') return
    try {
      out.push(JSON.parse(line))
    } catch (e) {
      throw new UsageError(`${path} line ${i + 1}: ${e.message}`)
    }
  })
  return out
}

function toMessage(rec) {
  const msg = {
    key: rec.key === undefined ? null : rec.key,
    value: rec.value === undefined ? null : rec.value,
  }
  if (Array.isArray(rec.headers) && rec.headers.length > 0) {
    const headers = {}
    for (const [k, v] of rec.headers) {
      if (v === null) throw new Unsupported('kafkajs cannot send a null header value (it sizes headers as strings)')
      if (k in headers) headers[k] = [].concat(headers[k], [v])
      else headers[k] = v
    }
    msg.headers = headers
  }
  if (rec.timestamp !== undefined && rec.timestamp !== null) msg.timestamp = String(rec.timestamp)
  if (rec.partition !== undefined && rec.partition !== null) msg.partition = rec.partition
  return msg
}

async function produce(kafka, o) {
  required(o, 'topic', 'input')
  const codec = o.codec === undefined ? 'none' : o.codec
  if (!(codec in CODECS)) throw new UsageError(`unknown codec ${codec}`)
  const acksName = o.acks === undefined ? 'all' : String(o.acks)
  if (!(acksName in ACKS)) throw new UsageError(`unknown acks ${acksName}`)
  const acks = ACKS[acksName]
  const idempotent = o.idempotent === true
  if (idempotent && acks !== -1) throw new UsageError('--idempotent needs --acks all')

  const messages = readInput(o.input).map(toMessage)
  const chosen = new Map()
  const defaultPartitioner = Partitioners.DefaultPartitioner()
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    idempotent,
    // An idempotent kafkajs producer is only safe with one request in flight.
    ...(idempotent ? { maxInFlightRequests: 1 } : {}),
    createPartitioner: () => args => {
      const p = defaultPartitioner(args)
      chosen.set(args.message, p)
      return p
    },
  })
  await producer.connect()
  try {
    const results = await producer.send({ topic: o.topic, messages, acks, compression: CODECS[codec] })
    const base = new Map()
    for (const r of results) base.set(Number(r.partition), r)
    const seen = new Map()
    for (const m of messages) {
      const partition = Number(chosen.get(m))
      const index = seen.get(partition) || 0
      seen.set(partition, index + 1)
      const r = base.get(partition)
      let offset = -1
      // acks=0: no response, no offset (the protocol's -1).
      if (acks !== 0 && r && r.baseOffset !== undefined) offset = Number(r.baseOffset) + index
      print({ partition, offset })
    }
  } catch (e) {
    // Nothing was acknowledged: every record gets an error line.
    // An error line's partition may never have been chosen: always -1.
    for (let i = 0; i < messages.length; i++) print({ partition: -1, offset: -1, error: errorDoc(e).error })
    throw e
  } finally {
    await producer.disconnect()
  }
}

module.exports = { produce, readInput, toMessage }
