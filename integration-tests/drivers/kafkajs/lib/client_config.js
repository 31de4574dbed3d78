// --client-config FILE (harness/client_config.py): Kafka's Java client settings in a
// properties file, mapped to kafkajs's options. A key kafkajs cannot take fails the
// driver, naming it, so a test never runs unsecured by mistake. TLS takes Kafka's PEM
// stores (harness/client_config.py): the trust store's CAs verify the broker (node checks
// the host name unless ssl.endpoint.identification.algorithm is empty); the key store file
// holds the client's key and certificate chain for mTLS.
'use strict'

const fs = require('fs')

// Java-properties: k=v or k: v, # and ! comments, \ line continuations.
function load(path) {
  const props = {}
  let pending = ''
  for (const raw of fs.readFileSync(path, 'utf8').split(/\r?\n/)) {
    let line = pending ? pending + raw.trimStart() : raw.trim()
    if (line.endsWith('\\') && !line.endsWith('\\\\')) {
      pending = line.slice(0, -1)
      continue
    }
    pending = ''
    if (!line || line[0] === '#' || line[0] === '!') continue
    const m = /^([^=:\s]+)\s*[=:]?\s*(.*)$/.exec(line)
    if (m) props[m[1]] = m[2]
  }
  return props
}

function jaasOptions(jaas) {
  const out = {}
  for (const m of jaas.matchAll(/(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"/g)) out[m[1]] = m[2].replace(/\\"/g, '"')
  return out
}

// The Kafka constructor options for the file's settings.
function kafkajsOptions(path) {
  if (!path) return {}
  const props = load(path)
  const out = {}
  let mechanism
  let options = {}
  let useTls = false
  const tls = {}
  for (const [key, value] of Object.entries(props)) {
    if (key === 'security.protocol') {
      useTls = value === 'SSL' || value === 'SASL_SSL'
    } else if (key === 'ssl.truststore.type' || key === 'ssl.keystore.type') {
      if (value !== 'PEM') throw new Error(`--client-config: ${key}=${value} has no mapping for kafkajs: use PEM`)
    } else if (key === 'ssl.truststore.location') {
      tls.ca = [fs.readFileSync(value, 'utf8')]
    } else if (key === 'ssl.keystore.location') {
      const pem = fs.readFileSync(value, 'utf8')
      tls.cert = pem
      tls.key = pem
    } else if (key === 'ssl.endpoint.identification.algorithm') {
      // Kafka's empty value: the chain is verified, the host name is not.
      if (value === '') tls.checkServerIdentity = () => undefined
    } else if (key === 'sasl.mechanism') {
      mechanism = value.toLowerCase()
    } else if (key === 'sasl.jaas.config') {
      options = jaasOptions(value)
    } else {
      throw new Error(`--client-config: ${key} has no mapping for kafkajs (lib/client_config.js)`)
    }
  }
  if (useTls) out.ssl = Object.keys(tls).length ? tls : true
  if (mechanism) out.sasl = { mechanism, username: options.username || '', password: options.password || '' }
  return out
}

module.exports = { kafkajsOptions }
