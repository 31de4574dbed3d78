// Shared plumbing for the kafkajs driver: argument parsing, JSON output on
// stdout, the kafkajs client (logging to stderr only), and error reports.
//
// Invariant: stdout carries only protocol JSON. kafkajs logs to the console
// by default, so every client is built with a log creator that writes to
// stderr.
'use strict'

const { kafkajsOptions } = require('./client_config')

// kafkajs 2.x prints a partitioner-change warning on every producer; the
// default (Java-compatible murmur2) partitioner is what we want.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { Kafka, logLevel } = require('kafkajs')

class UsageError extends Error {}

// Exit code 3 and {"unsupported": why}: kafkajs has no way to do this.
class Unsupported extends Error {}

// Options that may be given more than once.
const REPEATABLE = new Set(['config', 'set', 'delete'])
// Options that take no value.
const BOOLEAN = new Set(['idempotent', 'events'])

// Parses `--name value` / `--name=value` pairs into an object; repeatable
// options become arrays.
function parseArgs(argv) {
  const opts = { config: [], set: [], delete: [] }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument ${arg}`)
    let name = arg.slice(2)
    let value
    const eq = name.indexOf('=')
    if (eq >= 0) {
      value = name.slice(eq + 1)
      name = name.slice(0, eq)
    } else if (BOOLEAN.has(name)) {
      value = true
    } else {
      if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value`)
      value = argv[++i]
    }
    if (REPEATABLE.has(name)) opts[name].push(value)
    else opts[name] = value
  }
  return opts
}

function required(opts, ...names) {
  for (const n of names) {
    if (opts[n] === undefined || opts[n] === '') throw new UsageError(`--${n} is required`)
  }
}

function int(value, name) {
  const n = Number(value)
  if (!Number.isInteger(n)) throw new UsageError(`--${name} must be an integer, got ${value}`)
  return n
}

function splitKV(s) {
  const eq = s.indexOf('=')
  if (eq <= 0) throw new UsageError(`expected key=value, got ${s}`)
  return [s.slice(0, eq), s.slice(eq + 1)]
}

function print(doc) {
  process.stdout.write(JSON.stringify(doc) + '\n')
}

function stderrLogCreator() {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

// `clientConfig`: the --client-config file (security settings), if any.
function kafka(bootstrap, clientConfig) {
  return new Kafka({
    clientId: 'brook-kafkajs-driver',
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    logCreator: stderrLogCreator,
    ...kafkajsOptions(clientConfig),
  })
}

// The harness-facing description of a failure: the Kafka error name (e.g.
// TOPIC_ALREADY_EXISTS) when kafkajs reports a protocol error code.
function errorDoc(err) {
  let e = err
  // KafkaJSAggregateError (admin) wraps per-resource errors; KafkaJSNumberOfRetriesExceeded
  // wraps the last retriable one as .cause / .originalError.
  if (e && Array.isArray(e.errors) && e.errors.length > 0) e = e.errors[0]
  while (e && !e.type && (e.cause || e.originalError)) e = e.cause || e.originalError
  const doc = { error: (e && e.type) || String((err && err.message) || err) }
  if (e && typeof e.code === 'number') doc.code = e.code
  if (e && e.type && e.message) doc.message = e.message
  return doc
}

module.exports = { UsageError, Unsupported, parseArgs, required, int, splitKV, print, kafka, errorDoc }
