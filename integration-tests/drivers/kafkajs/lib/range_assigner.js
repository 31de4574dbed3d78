// A kafkajs partition assigner (its public custom-assigner API) under the
// protocol name "range", assigning as Kafka's RangeAssignor does: per topic,
// members sorted by member id get contiguous runs of partitions, the first
// ones one partition more when the count does not divide. kafkajs ships only
// its own round-robin assigner ("RoundRobinAssigner"), a protocol no other
// client speaks, so without this a kafkajs member cannot share a group with
// Java, librdkafka, franz-go or kafka-python members (the soak mixes them).
//
// Wire format: the subscription and assignment are ConsumerProtocol version
// 0 (kafkajs' AssignerProtocol). Newer members' subscriptions (v1-v3: owned
// partitions, generation, rack after the user data) decode as v0's prefix,
// and v0 assignments are what every client accepts.
'use strict'

const { AssignerProtocol } = require('kafkajs')

const { MemberMetadata, MemberAssignment } = AssignerProtocol

const RangeAssigner = ({ cluster }) => ({
  name: 'range',
  version: 0,

  async assign({ members, topics }) {
    const assignment = Object.create(null)
    for (const { memberId } of members) assignment[memberId] = Object.create(null)
    const subscribed = Object.create(null)
    for (const { memberId, memberMetadata } of members) {
      subscribed[memberId] = new Set(MemberMetadata.decode(memberMetadata).topics)
    }
    for (const topic of [...topics].sort()) {
      const partitions = cluster
        .findTopicPartitionMetadata(topic)
        .map(m => m.partitionId)
        .sort((a, b) => a - b)
      const consumers = members
        .map(({ memberId }) => memberId)
        .filter(id => subscribed[id].has(topic))
        .sort()
      if (consumers.length === 0) continue
      const per = Math.floor(partitions.length / consumers.length)
      const extra = partitions.length % consumers.length
      consumers.forEach((memberId, i) => {
        const start = per * i + Math.min(i, extra)
        const length = per + (i < extra ? 1 : 0)
        assignment[memberId][topic] = partitions.slice(start, start + length)
      })
    }
    return members.map(({ memberId }) => ({
      memberId,
      memberAssignment: MemberAssignment.encode({ version: this.version, assignment: assignment[memberId] }),
    }))
  },

  protocol({ topics }) {
    return { name: this.name, metadata: MemberMetadata.encode({ version: this.version, topics }) }
  },
})

module.exports = { RangeAssigner }
