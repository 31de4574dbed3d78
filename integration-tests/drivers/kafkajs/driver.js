#!/usr/bin/env node
// Brook's integration-test driver for kafkajs 2.2.4.
//
//   node driver.js <command> --bootstrap HOST:PORT [options]
//
// Speaks the driver protocol of integration-tests/README.md: one JSON
// document (or JSON lines) on stdout, diagnostics on stderr. Exit codes:
// 0 success; 1 client or broker error (a JSON {"error": ...} document is
// printed to stdout first); 2 bad command line; 3 unsupported by kafkajs
// ({"unsupported": why}: max-timestamp offsets).
// The driver does no checking of its own; the scenarios assert on its output.
// Client limits are documented in lib/admin.js, lib/produce.js,
// lib/consume.js, lib/group_consume.js and lib/offsets.js.
'use strict'

const { UsageError, Unsupported, parseArgs, print, kafka, errorDoc } = require('./lib/util')
const codecs = require('./lib/codecs')
const admin = require('./lib/admin')
const { produce } = require('./lib/produce')
const { txnProduce } = require('./lib/txn_produce')
const { txnCopy } = require('./lib/txn_copy')
const { consume } = require('./lib/consume')
const { groupConsume } = require('./lib/group_consume')
const { offsets } = require('./lib/offsets')

// Whole-command deadline: a broker that never answers fails the driver
// instead of hanging the test run.
const COMMAND_DEADLINE_MS = 120000

async function withAdmin(client, fn) {
  const a = client.admin()
  await a.connect()
  try {
    return await fn(a)
  } finally {
    await a.disconnect()
  }
}

async function run(argv) {
  const [command, ...rest] = argv
  const opts = parseArgs(rest)
  if (!opts.bootstrap) throw new UsageError('--bootstrap is required')
  await codecs.register()
  const client = kafka(opts.bootstrap, opts['client-config'])
  if (command === 'produce') return produce(client, opts)
  if (command === 'txn-produce') return txnProduce(client, opts)
  if (command === 'txn-copy') return txnCopy(client, opts)
  if (command === 'consume') return consume(client, opts)
  if (command === 'group-consume') return groupConsume(client, opts)
  if (command === 'offsets') return withAdmin(client, a => offsets(a, opts))
  const adminCmd = Object.prototype.hasOwnProperty.call(admin, command) ? admin[command] : undefined
  if (!adminCmd) throw new UsageError(`unknown command ${command}`)
  return withAdmin(client, a => adminCmd(a, opts))
}

// process.exit() drops what is still queued for a piped stdout (Node writes
// pipes asynchronously): exit only once everything printed is flushed.
function exitAfterFlush(code) {
  process.stdout.write('', () => process.exit(code))
}

function main() {
  const deadline = setTimeout(() => {
    process.stderr.write(`kafkajs-driver: no result after ${COMMAND_DEADLINE_MS} ms\n`)
    print({ error: 'DRIVER_TIMEOUT' })
    exitAfterFlush(1)
  }, COMMAND_DEADLINE_MS)
  deadline.unref()
  run(process.argv.slice(2)).then(
    () => exitAfterFlush(0),
    err => {
      if (err instanceof UsageError) {
        process.stderr.write(`kafkajs-driver: ${err.message}\n`)
        exitAfterFlush(2)
        return
      }
      if (err instanceof Unsupported) {
        print({ unsupported: err.message })
        exitAfterFlush(3)
        return
      }
      process.stderr.write(`kafkajs-driver ${process.argv[2]}: ${(err && err.stack) || err}\n`)
      print(errorDoc(err))
      exitAfterFlush(1)
    }
  )
}

main()
