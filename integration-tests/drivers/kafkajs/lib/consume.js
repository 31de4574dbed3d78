// The consume command. kafkajs has no assign(): it consumes only through a
// consumer group. So each run joins a fresh group (unique id, never reused,
// no offsets committed) whose only member gets exactly the requested
// partitions from a custom assigner, and the start position comes from the
// group machinery: earliest = subscribe fromBeginning (a new group has no
// committed offsets, so the reset policy applies), latest = not
// fromBeginning, OFFSET = consumer.seek on every assigned partition right
// after run() (kafkajs applies pending seeks before the first fetch).
//
// Consequence for Brook: this driver needs FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat and LeaveGroup to work before it can consume at all.
//
// Output: one JSON line per record in the order received; at most --count
// lines; at --timeout-ms it stops and exits 0 with what it has.
'use strict'

const crypto = require('crypto')
const { AssignerProtocol } = require('kafkajs')
const { UsageError, required, int, print } = require('./util')

function parsePartitions(s) {
  if (s === undefined || s === '') return null
  return s.split(',').map(x => {
    const n = Number(x.trim())
    if (!Number.isInteger(n) || n < 0) throw new UsageError(`bad partition ${x}`)
    return n
  })
}

// Gives the one member of our private group the requested partitions (all
// partitions of the topic when none were named).
function fixedAssigner(topic, wanted) {
  return ({ cluster }) => ({
    name: 'BrookDriverFixedAssigner',
    version: 1,
    async assign({ members }) {
      const partitions =
        wanted || cluster.findTopicPartitionMetadata(topic).map(p => p.partitionId).sort((a, b) => a - b)
      return members.map((m, i) => ({
        memberId: m.memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: 1,
          assignment: i === 0 ? { [topic]: partitions } : {},
          userData: Buffer.alloc(0),
        }),
      }))
    },
    protocol({ topics }) {
      return {
        name: 'BrookDriverFixedAssigner',
        metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }),
      }
    },
  })
}

function str(buf) {
  return buf === null || buf === undefined ? null : buf.toString('utf8')
}

// kafkajs decodes headers into an object; a repeated key holds an array.
function headerPairs(headers) {
  const out = []
  for (const [k, v] of Object.entries(headers || {})) {
    if (Array.isArray(v)) for (const x of v) out.push([k, str(x)])
    else out.push([k, str(v)])
  }
  return out
}

async function topicPartitions(kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    return md.topics[0].partitions.map(p => p.partitionId)
  } finally {
    await admin.disconnect()
  }
}

async function consume(kafka, o) {
  required(o, 'topic', 'count')
  const count = int(o.count, 'count')
  if (count <= 0) throw new UsageError('--count must be > 0')
  const from = o.from === undefined ? 'earliest' : o.from
  let seekTo = null
  if (from !== 'earliest' && from !== 'latest') {
    seekTo = int(from, 'from')
    if (seekTo < 0) throw new UsageError('--from offset must be >= 0')
  }
  const timeoutMs = int(o['timeout-ms'] === undefined ? 20000 : o['timeout-ms'], 'timeout-ms')
  const wanted = parsePartitions(o.partitions)
  const consumerOpts = {
    groupId: `brook-kafkajs-driver-${crypto.randomUUID()}`,
    allowAutoTopicCreation: false,
    partitionAssigners: [fixedAssigner(o.topic, wanted)],
  }
  // --isolation: kafkajs' own default is read_committed (readUncommitted: false).
  if (o.isolation !== undefined) {
    if (o.isolation !== 'read_committed' && o.isolation !== 'read_uncommitted') {
      throw new UsageError(`--isolation expects read_committed|read_uncommitted, got ${o.isolation}`)
    }
    consumerOpts.readUncommitted = o.isolation === 'read_uncommitted'
  }
  if (o['max-bytes'] !== undefined) {
    consumerOpts.maxBytes = int(o['max-bytes'], 'max-bytes')
    consumerOpts.maxBytesPerPartition = consumerOpts.maxBytes
  }
  // Known before run(), so that the seeks are pending before the first fetch.
  const seekPartitions = seekTo === null ? [] : wanted || (await topicPartitions(kafka, o.topic))
  const consumer = kafka.consumer(consumerOpts)
  let printed = 0
  let finish
  const done = new Promise(resolve => {
    finish = resolve
  })
  const timer = setTimeout(finish, timeoutMs)
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [o.topic], fromBeginning: from !== 'latest' })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (printed >= count) return
        print({
          partition,
          offset: Number(message.offset),
          key: str(message.key),
          value: str(message.value),
          headers: headerPairs(message.headers),
          timestamp: Number(message.timestamp),
        })
        printed++
        if (printed >= count) finish()
      },
    })
    for (const partition of seekPartitions) consumer.seek({ topic: o.topic, partition, offset: String(seekTo) })
    await done
  } finally {
    clearTimeout(timer)
    await consumer.disconnect()
  }
}

module.exports = { consume }
