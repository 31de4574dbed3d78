// The txn-produce command (integration-tests/README.md): every input record
// carries "txn", the number of its transaction; the transactions run one
// after another in input order with one transactional producer
// (--transactional-id), each committed unless --abort lists it. Prints one
// {"txn","partition","offset"} line per input record, in input order
// (aborted records included: they are in the log, never read_committed).
//
// Offsets as in produce.js: one send per transaction puts each partition's
// messages in one batch in input order, so a record's offset is its
// partition's base offset plus its index there. Records name their partition
// (kafkajs' default partitioner honours message.partition).
'use strict'

const { readInput, toMessage } = require('./produce')
const { UsageError, required, print } = require('./util')

async function txnProduce(kafka, o) {
  required(o, 'topic', 'input', 'transactional-id')
  const aborts = new Set(String(o.abort === undefined ? '' : o.abort).split(',').filter(s => s.trim() !== '').map(Number))
  const records = readInput(o.input)
  const order = []
  for (const r of records) {
    if (r.partition === undefined || r.partition === null) throw new UsageError('txn-produce records name their partition')
    if (!order.includes(r.txn)) order.push(r.txn)
  }
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    transactionalId: String(o['transactional-id']),
    idempotent: true,
    maxInFlightRequests: 1,
  })
  await producer.connect()
  const out = new Array(records.length)
  try {
    for (const txnNumber of order) {
      const indexes = []
      records.forEach((r, i) => { if (r.txn === txnNumber) indexes.push(i) })
      const txn = await producer.transaction()
      try {
        const results = await txn.send({ topic: o.topic, messages: indexes.map(i => toMessage(records[i])) })
        const base = new Map()
        for (const r of results) base.set(Number(r.partition), Number(r.baseOffset))
        const seen = new Map()
        for (const i of indexes) {
          const partition = Number(records[i].partition)
          const index = seen.get(partition) || 0
          seen.set(partition, index + 1)
          out[i] = { txn: txnNumber, partition, offset: base.get(partition) + index }
        }
      } catch (e) {
        await txn.abort()
        throw e
      }
      if (aborts.has(txnNumber)) await txn.abort()
      else await txn.commit()
    }
  } finally {
    await producer.disconnect()
  }
  for (const line of out) print(line)
}

module.exports = { txnProduce }
