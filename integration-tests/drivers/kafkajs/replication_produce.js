#!/usr/bin/env node
// `produce-paced` with kafkajs, for the replication tests (test_replication_*.py,
// harness/replication.py; the protocol is described there):
//
//   node replication_produce.js produce-paced --bootstrap B --topic T --input FILE [--acks all|1|0]
//     [--idempotent] [--interval-ms 10] [--retries N] [--request-timeout-ms MS] [--delivery-timeout-ms MS]
//
// One producer sends the records one send() at a time (kafkajs' idempotent producer is only
// safe with one request in flight), interval-ms apart, printing each result as it arrives:
// {"index":I,"partition":P,"offset":O} or {"index":I,"error":"NOT_ENOUGH_REPLICAS","message":..}.
// Retries: --retries (default 30) with at most 1 s between tries, so a leader failover of a few
// seconds is ridden out as the other clients' defaults do.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')
const { parseArgs, print, errorDoc } = require('./lib/util')

const ACKS = { all: -1, '-1': -1, 1: 1, 0: 0 }
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function main() {
  const [command, ...rest] = process.argv.slice(2)
  if (command !== 'produce-paced') throw new Error(`unknown command ${command}`)
  const o = parseArgs(rest)
  const acks = ACKS[o.acks === undefined ? 'all' : String(o.acks)]
  const idempotent = o.idempotent === true
  const retries = o.retries === undefined ? 30 : Number(o.retries)
  const interval = o['interval-ms'] === undefined ? 10 : Number(o['interval-ms'])
  const kafka = new Kafka({
    clientId: 'brook-kafkajs-paced',
    brokers: o.bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    ...(o['request-timeout-ms'] !== undefined ? { requestTimeout: Number(o['request-timeout-ms']) } : {}),
    retry: { retries, initialRetryTime: 200, maxRetryTime: 1000 },
  })
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    idempotent,
    ...(idempotent ? { maxInFlightRequests: 1 } : {}),
    retry: { retries, initialRetryTime: 200, maxRetryTime: 1000 },
  })
  await producer.connect()
  const records = fs.readFileSync(o.input, 'utf8').split('\n').filter(l => l.trim() !== '').map(l => JSON.parse(l))
  for (let index = 0; index < records.length; index++) {
    const r = records[index]
    const message = { key: r.key === undefined ? null : r.key, value: r.value === undefined ? null : r.value }
    if (r.partition !== undefined && r.partition !== null) message.partition = r.partition
    try {
      const [res] = await producer.send({ topic: o.topic, acks, messages: [message] })
      print({ index, partition: res.partition, offset: acks === 0 ? -1 : Number(res.baseOffset) })
    } catch (e) {
      const doc = errorDoc(e)
      print({ index, error: doc.error, message: String(e.message) })
    }
    await sleep(interval)
  }
  await producer.disconnect()
}

main().then(
  () => process.stdout.write('', () => process.exit(0)),
  e => { process.stderr.write(`${e.stack || e}\n`); process.stdout.write('', () => process.exit(1)) })
