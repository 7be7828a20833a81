// Idempotent kafkajs producer for test_idempotent_crash.py:
//   node idem_producer.js BOOTSTRAP TOPIC N PARTITIONS
// Record i has the value "%08d" and goes to partition i % PARTITIONS, in order. Prints
// "ack <partition> <offset> <i>" per acknowledged record, "fail <i> <error>" on a final failure,
// "done" at the end. kafkajs logs go to stderr.
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

const CHUNK = 600

async function main () {
  const [bootstrap, topic, nText, partsText] = process.argv.slice(2)
  const n = Number(nText)
  const parts = Number(partsText)
  const kafka = new Kafka({
    clientId: 'kafkad-compat-idem',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, label, log }) =>
      process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`),
    retry: { retries: 40, initialRetryTime: 100, maxRetryTime: 1000 },
    connectionTimeout: 3000,
    requestTimeout: 10000
  })
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const lines = []
  try {
    for (let start = 0; start < n; start += CHUNK) {
      const ids = []
      for (let i = start; i < Math.min(n, start + CHUNK); i++) ids.push(i)
      const messages = ids.map((i) => ({
        value: String(i).padStart(8, '0'),
        partition: i % parts
      }))
      try {
        const meta = await producer.send({ topic, acks: -1, messages })
        for (const m of meta) {
          let offset = BigInt(m.baseOffset)
          for (const i of ids) {
            if (i % parts === m.partition) lines.push(`ack ${m.partition} ${offset++} ${i}`)
          }
        }
      } catch (err) {
        for (const i of ids) lines.push(`fail ${i} ${err.name}`)
      }
      process.stdout.write(lines.join('\n') + '\n')
      lines.length = 0
    }
  } finally {
    await producer.disconnect()
  }
  process.stdout.write('done\n')
}

main().catch((err) => {
  process.stderr.write(`fatal ${err.stack}\n`)
  process.exitCode = 1
})
