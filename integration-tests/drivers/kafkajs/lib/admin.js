// Admin commands of the driver protocol through the kafkajs admin client.
//
// kafkajs limits the harness must know:
// - describe-topic: kafkajs speaks Metadata up to v6, before topic ids
//   (KIP-516, v10), so "topic_id" is always null.
// - metadata / list-topics: kafkajs does not expose is_internal, so
//   Kafka's internal topic names (Topic.INTERNAL_TOPICS) are filtered by name.
// - alter-configs: kafkajs has only the legacy, non-incremental AlterConfigs
//   (it replaces the resource's whole dynamic config). The incremental
//   protocol command is emulated: describe, keep the current dynamic entries
//   (source DYNAMIC_TOPIC_CONFIG / DYNAMIC_BROKER_CONFIG), apply --set and
//   --delete, send the full set. Sensitive dynamic values (described as null)
//   cannot be carried over and are dropped.
// - create-topic of an existing topic: kafkajs resolves false instead of
//   failing; the driver reports it as TOPIC_ALREADY_EXISTS like other clients.
'use strict'

const { ConfigResourceTypes } = require('kafkajs')
const { UsageError, required, int, splitKV, print } = require('./util')

const INTERNAL_TOPICS = new Set(['__consumer_offsets', '__transaction_state', '__share_group_state'])

// DescribeConfigs v1+ config_source codes, named as the Java AdminClient does.
const CONFIG_SOURCES = {
  1: 'DYNAMIC_TOPIC_CONFIG',
  2: 'DYNAMIC_BROKER_CONFIG',
  3: 'DYNAMIC_DEFAULT_BROKER_CONFIG',
  4: 'STATIC_BROKER_CONFIG',
  5: 'DEFAULT_CONFIG',
  6: 'DYNAMIC_BROKER_LOGGER_CONFIG',
  7: 'CLIENT_METRICS_CONFIG',
  8: 'GROUP_CONFIG',
}

class KafkaError extends Error {
  constructor(type, message) {
    super(message)
    this.type = type
  }
}

async function metadata(admin) {
  const cluster = await admin.describeCluster()
  const md = await admin.fetchTopicMetadata()
  const topics = {}
  for (const t of md.topics) {
    if (!INTERNAL_TOPICS.has(t.name)) topics[t.name] = { partitions: t.partitions.length }
  }
  print({
    brokers: cluster.brokers.map(b => ({ id: b.nodeId, host: b.host, port: b.port })),
    controller_id: cluster.controller,
    topics,
  })
}

async function createTopic(admin, o) {
  required(o, 'topic', 'partitions')
  const configEntries = o.config.map(kv => {
    const [name, value] = splitKV(kv)
    return { name, value }
  })
  const created = await admin.createTopics({
    waitForLeaders: true,
    topics: [
      {
        topic: o.topic,
        numPartitions: int(o.partitions, 'partitions'),
        replicationFactor: int(o['replication-factor'] || 1, 'replication-factor'),
        configEntries,
      },
    ],
  })
  if (!created) {
    const err = new KafkaError('TOPIC_ALREADY_EXISTS', `Topic '${o.topic}' already exists.`)
    err.code = 36
    throw err
  }
  print({ ok: true })
}

async function deleteTopic(admin, o) {
  required(o, 'topic')
  await admin.deleteTopics({ topics: [o.topic] })
  print({ ok: true })
}

async function createPartitions(admin, o) {
  required(o, 'topic', 'total')
  // count is the new total (KIP-195), as in the wire request.
  await admin.createPartitions({ topicPartitions: [{ topic: o.topic, count: int(o.total, 'total') }] })
  print({ ok: true })
}

async function describeTopic(admin, o) {
  required(o, 'topic')
  const md = await admin.fetchTopicMetadata({ topics: [o.topic] })
  const t = md.topics.find(x => x.name === o.topic)
  if (!t) throw new KafkaError('UNKNOWN_TOPIC_OR_PARTITION', `topic ${o.topic} not in metadata`)
  print({
    name: t.name,
    topic_id: null,
    partitions: t.partitions
      .map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr }))
      .sort((a, b) => a.partition - b.partition),
  })
}

async function listTopics(admin) {
  const names = await admin.listTopics()
  print({ topics: names.filter(n => !INTERNAL_TOPICS.has(n)).sort() })
}

function resourceOf(o) {
  const hasTopic = o.topic !== undefined
  const hasBroker = o.broker !== undefined
  if (hasTopic === hasBroker) throw new UsageError('exactly one of --topic or --broker is required')
  return hasTopic
    ? { type: ConfigResourceTypes.TOPIC, name: o.topic, dynamicSource: 1 }
    : { type: ConfigResourceTypes.BROKER, name: String(int(o.broker, 'broker')), dynamicSource: 2 }
}

async function describeEntries(admin, res) {
  const out = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: res.type, name: res.name }],
  })
  const r = out.resources[0]
  if (!r) throw new Error('DescribeConfigs returned no resource')
  if (r.errorCode) {
    const err = new KafkaError(`KAFKA_ERROR_${r.errorCode}`, r.errorMessage || '')
    err.code = r.errorCode
    throw err
  }
  return r.configEntries
}

async function describeConfigs(admin, o) {
  const entries = await describeEntries(admin, resourceOf(o))
  const configs = {}
  for (const c of entries) {
    configs[c.configName] = {
      value: c.configValue,
      source: CONFIG_SOURCES[c.configSource] || 'UNKNOWN',
      read_only: c.readOnly,
    }
  }
  print({ configs })
}

async function alterConfigs(admin, o) {
  const res = resourceOf(o)
  const current = await describeEntries(admin, res)
  const next = new Map()
  for (const c of current) {
    if (c.configSource === res.dynamicSource && c.configValue !== null) next.set(c.configName, c.configValue)
  }
  for (const kv of o.set) {
    const [k, v] = splitKV(kv)
    next.set(k, v)
  }
  for (const k of o.delete) next.delete(k)
  await admin.alterConfigs({
    validateOnly: false,
    resources: [
      {
        type: res.type,
        name: res.name,
        configEntries: Array.from(next, ([name, value]) => ({ name, value })),
      },
    ],
  })
  print({ ok: true })
}

module.exports = {
  metadata,
  'create-topic': createTopic,
  'delete-topic': deleteTopic,
  'create-partitions': createPartitions,
  'describe-topic': describeTopic,
  'list-topics': listTopics,
  'describe-configs': describeConfigs,
  'alter-configs': alterConfigs,
}
