// Runs kafkajs operations for test_kafkajs.py and prints their results as one JSON line.
// stdin: {"brokers": ["host:port"], "ops": [{"op": "...", ...}, ...], "tls": {...} (optional)}
// stdout: {"results": [...]} or {"error": {"name", "message", "type"}}; kafkajs logs go to stderr.
// Bytes travel as base64 strings (null stays null).
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const fs = require('fs')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

const b64 = (s) => (s === null ? null : Buffer.from(s, 'base64'))

function toMessage (m) {
  const headers = {}
  for (const [name, value] of m.headers || []) {
    // Repeated header names become an array, which kafkajs sends in order.
    if (name in headers) headers[name] = [].concat(headers[name], b64(value))
    else headers[name] = b64(value)
  }
  const out = { key: b64(m.key), value: b64(m.value), headers }
  if (m.timestamp !== undefined) out.timestamp = String(m.timestamp)
  if (m.partition !== undefined) out.partition = m.partition
  return out
}

const OPS = {
  async createTopics (admin, _producer, o) {
    return admin.createTopics({ topics: o.topics, waitForLeaders: true, timeout: 10000 })
  },
  async listTopics (admin) {
    return admin.listTopics()
  },
  async fetchTopicMetadata (admin, _producer, o) {
    return admin.fetchTopicMetadata({ topics: o.topics })
  },
  async describeCluster (admin) {
    return admin.describeCluster()
  },
  async fetchTopicOffsets (admin, _producer, o) {
    return admin.fetchTopicOffsets(o.topic)
  },
  async fetchTopicOffsetsByTimestamp (admin, _producer, o) {
    return admin.fetchTopicOffsetsByTimestamp(o.topic, o.timestamp)
  },
  async deleteTopicRecords (admin, _producer, o) {
    return admin.deleteTopicRecords({ topic: o.topic, partitions: o.partitions })
  },
  async send (_admin, producer, o) {
    return producer.send({
      topic: o.topic,
      acks: o.acks,
      compression: CODECS[o.compression || 'none'],
      messages: o.messages.map(toMessage)
    })
  }
}

function stderrLogger () {
  return ({ namespace, label, log }) => {
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`)
  }
}

function saslOptions (sasl) {
  if (sasl.mechanism !== 'oauthbearer') return sasl
  return { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: sasl.token }) }
}

async function main () {
  let input = ''
  for await (const chunk of process.stdin) input += chunk
  const { brokers, ops, tls, sasl } = JSON.parse(input)
  // tls: {ca, cert, key} PEM file paths (cert and key optional): an SSL listener
  const ssl = tls
    ? {
        ca: [fs.readFileSync(tls.ca, 'utf-8')],
        ...(tls.cert ? { cert: fs.readFileSync(tls.cert, 'utf-8') } : {}),
        ...(tls.key ? { key: fs.readFileSync(tls.key, 'utf-8') } : {})
      }
    : undefined
  const kafka = new Kafka({
    clientId: 'kafkad-compat',
    brokers,
    ssl,
    // sasl: {mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512', username, password},
    // or {mechanism: 'oauthbearer', token}: kafkajs's token provider hands out that token
    ...(sasl ? { sasl: saslOptions(sasl) } : {}),
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    retry: { retries: 2 },
    connectionTimeout: 5000,
    requestTimeout: 10000
  })
  const admin = kafka.admin()
  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: false })
  await admin.connect()
  await producer.connect()
  try {
    const results = []
    for (const o of ops) results.push(await OPS[o.op](admin, producer, o))
    return { results }
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
}

main().then(
  (out) => process.stdout.write(JSON.stringify(out) + '\n'),
  (err) => {
    const error = { name: err.name, message: err.message, type: err.type || null }
    process.stdout.write(JSON.stringify({ error }) + '\n')
    process.exitCode = 1
  }
)
