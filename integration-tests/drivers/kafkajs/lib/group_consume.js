// The group-consume command (integration-tests/README.md): a kafkajs group
// member (classic protocol; kafkajs ships one assigner, round-robin, the
// default; --assignor range is lib/range_assigner.js; cooperative-sticky is
// unsupported, exit 3: kafkajs has no cooperative protocol). It prints each
// record it is given as one JSON line {"partition","offset","key","value"}
// and commits the offset after it before handling the next one (so a later
// member resumes exactly there, and a killed member causes re-delivery,
// never loss). It stops after --count records, after --idle-ms without
// records once one arrived, at --timeout-ms, or on SIGTERM/SIGINT; then it
// prints {"assigned":[..],"generation":G,"member_id":".."} and disconnects
// (LeaveGroup). --session-timeout-ms sets sessionTimeout (default 30000).
//
// --commit-delay-ms MS: the member handles whole batches (eachBatch) and
// waits MS, heartbeating, between printing a batch and committing after its
// last record, so a scenario can freeze it (SIGSTOP) with a commit pending
// and resume it once the group has moved on (a "zombie"). --events: a failed
// commit becomes {"event":"commit-failed","error":".."} and the run goes on
// (without it the error reaches kafkajs, which restarts the consumer); each
// GROUP_JOIN is printed as {"event":"assigned","partitions":[..],
// "generation":null} (kafkajs does not expose the generation id).
'use strict'

const { UsageError, Unsupported, required, int, print } = require('./util')
const { RangeAssigner } = require('./range_assigner')

function str(buf) {
  return buf === null || buf === undefined ? null : buf.toString('utf8')
}

async function groupConsume(kafka, o) {
  required(o, 'topic', 'group')
  // Default: kafkajs' own round-robin assigner. `range` is lib/range_assigner.js (kafkajs'
  // custom-assigner API), so kafkajs members can join groups of other clients' range members.
  const assigners = { roundrobin: undefined, range: [RangeAssigner] }
  const assignor = o.assignor === undefined ? 'roundrobin' : o.assignor
  if (!(assignor in assigners)) {
    throw new Unsupported(`kafkajs has no ${assignor} assigner (only round-robin, and range from this driver)`)
  }
  const count = o.count === undefined ? Infinity : int(o.count, 'count')
  const idleMs = o['idle-ms'] === undefined ? 0 : int(o['idle-ms'], 'idle-ms')
  const timeoutMs = o['timeout-ms'] === undefined ? 30000 : int(o['timeout-ms'], 'timeout-ms')
  const sessionTimeout = o['session-timeout-ms'] === undefined ? 30000 : int(o['session-timeout-ms'], 'session-timeout-ms')
  const commitDelayMs = o['commit-delay-ms'] === undefined ? 0 : int(o['commit-delay-ms'], 'commit-delay-ms')
  const events = o.events === true
  const from = o.from === undefined ? 'earliest' : o.from
  if (from !== 'earliest' && from !== 'latest') throw new UsageError('--from must be earliest or latest')
  const consumerOpts = { groupId: o.group, sessionTimeout, heartbeatInterval: 1000, allowAutoTopicCreation: false }
  if (assigners[assignor] !== undefined) consumerOpts.partitionAssigners = assigners[assignor]
  if (o['instance-id'] !== undefined) throw new Unsupported('kafkajs has no static membership (group.instance.id)')
  const consumer = kafka.consumer(consumerOpts)
  let assigned = []
  // kafkajs' GROUP_JOIN event does not carry the generation id: printed as null.
  const generation = null
  let memberId = null
  consumer.on(consumer.events.GROUP_JOIN, e => {
    assigned = (e.payload.memberAssignment[o.topic] || []).slice().sort((a, b) => a - b)
    memberId = e.payload.memberId
    if (events && !stopped) print({ event: 'assigned', partitions: assigned, generation })
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
  const commit = async (topic, partition, offset) => {
    try {
      await consumer.commitOffsets([{ topic, partition, offset }])
    } catch (e) {
      if (!events) throw e
      process.stderr.write(`commit: ${e.stack || e}\n`)
      // kafkajs wraps the broker's error (KafkaJSNonRetriableError) and keeps only its message.
      const type = e.type || (e.cause && e.cause.type)
      print({ event: 'commit-failed', error: `${e.name}: ${e.message}${type ? ` (${type})` : ''}` })
    }
  }
  // Prints a record unless the run is over; returns false once nothing more may be printed.
  const emit = (partition, message) => {
    if (stopped || printed >= count) return false
    print({ partition, offset: Number(message.offset), key: str(message.key), value: str(message.value) })
    printed++
    lastRecordAt = Date.now()
    return true
  }
  const eachMessage = async ({ topic, partition, message }) => {
    if (!emit(partition, message)) return
    await commit(topic, partition, String(Number(message.offset) + 1))
    if (printed >= count) finish()
  }
  const eachBatch = async ({ batch, heartbeat }) => {
    let next = null
    for (const message of batch.messages) {
      if (!emit(batch.partition, message)) break
      next = String(Number(message.offset) + 1)
    }
    if (next === null) return
    // Heartbeat through the delay: the member stays in the group unless frozen. A heartbeat
    // that fails (the member was frozen past its session and resumed with the heartbeat still
    // unsent) ends the wait, and the member commits what it handled, as the other clients'
    // members do: the broker, not this member's heartbeat, must refuse the stale commit.
    const until = Date.now() + commitDelayMs
    while (Date.now() < until) {
      try {
        await heartbeat()
      } catch (e) {
        if (!events) throw e
        process.stderr.write(`heartbeat during the commit delay: ${e.message}\n`)
        break
      }
      await new Promise(resolve => setTimeout(resolve, Math.min(200, Math.max(0, until - Date.now()))))
    }
    await commit(batch.topic, batch.partition, next)
    if (printed >= count) finish()
  }
  process.once('SIGTERM', finish)
  process.once('SIGINT', finish)
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [o.topic], fromBeginning: from === 'earliest' })
    await consumer.run(commitDelayMs > 0 ? { autoCommit: false, eachBatch } : { autoCommit: false, eachMessage })
    await done
    print({ assigned, generation, member_id: memberId })
  } finally {
    clearTimeout(deadline)
    clearInterval(idleCheck)
    await consumer.disconnect()
  }
}

module.exports = { groupConsume }
