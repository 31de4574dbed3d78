// The group-consume command (integration-tests/README.md): a kafkajs group
// member (classic protocol; kafkajs ships one assigner, round-robin, so
// --assignor range|cooperative-sticky is unsupported, exit 3). It prints each
// record it is given as one JSON line {"partition","offset","key","value"}
// and commits the offset after it before handling the next one (so a later
// member resumes exactly there, and a killed member causes re-delivery,
// never loss). It stops after --count records, after --idle-ms without
// records once one arrived, at --timeout-ms, or on SIGTERM/SIGINT; then it
// prints {"assigned":[..],"generation":G,"member_id":".."} and disconnects
// (LeaveGroup). --session-timeout-ms sets sessionTimeout (default 30000).
'use strict'

const { UsageError, Unsupported, required, int, print } = require('./util')

function str(buf) {
  return buf === null || buf === undefined ? null : buf.toString('utf8')
}

async function groupConsume(kafka, o) {
  required(o, 'topic', 'group')
  if (o.assignor !== undefined && o.assignor !== 'roundrobin') {
    throw new Unsupported(`kafkajs has only the round-robin assigner, not ${o.assignor}`)
  }
  const count = o.count === undefined ? Infinity : int(o.count, 'count')
  const idleMs = o['idle-ms'] === undefined ? 0 : int(o['idle-ms'], 'idle-ms')
  const timeoutMs = o['timeout-ms'] === undefined ? 30000 : int(o['timeout-ms'], 'timeout-ms')
  const sessionTimeout = o['session-timeout-ms'] === undefined ? 30000 : int(o['session-timeout-ms'], 'session-timeout-ms')
  const from = o.from === undefined ? 'earliest' : o.from
  if (from !== 'earliest' && from !== 'latest') throw new UsageError('--from must be earliest or latest')
  const consumerOpts = { groupId: o.group, sessionTimeout, heartbeatInterval: 1000, allowAutoTopicCreation: false }
  if (o['instance-id'] !== undefined) throw new Unsupported('kafkajs has no static membership (group.instance.id)')
  const consumer = kafka.consumer(consumerOpts)
  let assigned = []
  // kafkajs' GROUP_JOIN event does not carry the generation id: printed as null.
  const generation = null
  let memberId = null
  consumer.on(consumer.events.GROUP_JOIN, e => {
    assigned = (e.payload.memberAssignment[o.topic] || []).slice().sort((a, b) => a - b)
    memberId = e.payload.memberId
  })
  let printed = 0
  let lastRecordAt = 0
  // Once finished, nothing more is printed (the final line must be last).
  let stopped = false
  let resolveDone
  const done = new Promise(resolve => {
    resolveDone = resolve
  })
  const finish = () => {
    stopped = true
    resolveDone()
  }
  const deadline = setTimeout(finish, timeoutMs)
  const idleCheck = setInterval(() => {
    if (idleMs > 0 && printed > 0 && Date.now() - lastRecordAt >= idleMs) finish()
  }, 100)
  process.once('SIGTERM', finish)
  process.once('SIGINT', finish)
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [o.topic], fromBeginning: from === 'earliest' })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        if (stopped || printed >= count) return
        print({ partition, offset: Number(message.offset), key: str(message.key), value: str(message.value) })
        printed++
        lastRecordAt = Date.now()
        const next = String(Number(message.offset) + 1)
        await consumer.commitOffsets([{ topic, partition, offset: next }])
        if (printed >= count) finish()
      },
    })
    await done
    print({ assigned, generation, member_id: memberId })
  } finally {
    clearTimeout(deadline)
    clearInterval(idleCheck)
    await consumer.disconnect()
  }
}

module.exports = { groupConsume }
