// The txn-copy command (integration-tests/README.md): consume-transform-produce
// as kafkajs offers it. A group member (read_committed, no auto commit) copies
// each batch it is given (one partition, at most maxBytesPerPartition: a few
// dozen records; key, value, headers, same partition) to --output-topic in one
// transaction together with the offset after the batch (transaction.sendOffsets
// with the group id: kafkajs 2.2.4 sends AddOffsetsToTxn and TxnOffsetCommit
// without the member's generation, the pre-KIP-447 form). Transactions 1, 1+N,
// ... (--abort-every N) are aborted and the consumer seeks back to the batch's
// first offset (the committed position: every earlier batch of the partition
// was committed). Stops once --count records are committed. Prints
// {"txn","records","committed"} per transaction, then
// {"copied","transactions","aborted"}.
'use strict'

const { UsageError, required, int, print } = require('./util')

async function txnCopy(kafka, o) {
  required(o, 'topic', 'output-topic', 'group', 'transactional-id', 'count')
  const count = int(o.count, 'count')
  const abortEvery = o['abort-every'] === undefined ? 0 : int(o['abort-every'], 'abort-every')
  const timeoutMs = o['timeout-ms'] === undefined ? 60000 : int(o['timeout-ms'], 'timeout-ms')
  if (count <= 0) throw new UsageError('--count must be > 0')
  const consumer = kafka.consumer({
    groupId: o.group,
    readUncommitted: false,
    allowAutoTopicCreation: false,
    maxBytesPerPartition: 2048,
    heartbeatInterval: 1000,
  })
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    transactionalId: String(o['transactional-id']),
    idempotent: true,
    maxInFlightRequests: 1,
  })
  await producer.connect()
  await consumer.connect()
  let copied = 0
  let txnNumber = 0
  let aborted = 0
  let finish
  const finished = new Promise(resolve => { finish = resolve })
  const timer = setTimeout(() => finish(), timeoutMs)
  try {
    await consumer.subscribe({ topic: o.topic, fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
        if (copied >= count || !isRunning() || isStale() || batch.messages.length === 0) return
        const msgs = batch.messages
        const txn = await producer.transaction()
        let commit = !(abortEvery > 0 && txnNumber % abortEvery === 1)
        try {
          await txn.send({
            topic: o['output-topic'],
            messages: msgs.map(m => ({ key: m.key, value: m.value, headers: m.headers, partition: batch.partition })),
          })
          const next = (BigInt(msgs[msgs.length - 1].offset) + 1n).toString()
          await txn.sendOffsets({
            consumerGroupId: o.group,
            topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
          })
        } catch (e) {
          await txn.abort()
          throw e
        }
        if (commit) {
          await txn.commit()
          for (const m of msgs) resolveOffset(m.offset)
          copied += msgs.length
        } else {
          await txn.abort()
          aborted++
          consumer.seek({ topic: batch.topic, partition: batch.partition, offset: msgs[0].offset })
        }
        print({ txn: txnNumber, records: msgs.length, committed: commit })
        txnNumber++
        if (copied >= count) finish()
      },
    })
    await finished
  } finally {
    clearTimeout(timer)
    await consumer.disconnect()
    await producer.disconnect()
  }
  print({ copied, transactions: txnNumber, aborted })
}

module.exports = { txnCopy }
