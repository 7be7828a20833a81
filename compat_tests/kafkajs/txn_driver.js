// Transactional kafkajs for test_transactions_kafkajs.py, driven one command at a time:
//   node txn_driver.js BOOTSTRAP
// stdin: one JSON command a line; stdout: one JSON answer a line, {"ok": ...} or
// {"error": {"name", "type", "message"}} (type is the Kafka error name, e.g. INVALID_PRODUCER_EPOCH).
// Named producers (transactional, idempotent, maxInFlightRequests 1) keep their open transaction
// between commands, so a test can interleave producers, fence one with another, or kill the
// process with a transaction open. kafkajs logs go to stderr.
//
// Commands ("name" picks a producer):
//   {"op": "producer", "name", "tid", "timeoutMs"?}   create and connect (InitProducerId happens
//                                                     on the first "begin", as kafkajs does it)
//   {"op": "begin", "name"}                           producer.transaction()
//   {"op": "send", "name", "topic", "messages": [{"value", "partition"}]}  txn.send, acks -1
//   {"op": "sendOffsets", "name", "group", "topics": [{"topic", "partitions": [{"partition", "offset"}]}]}
//   {"op": "commit" | "abort", "name"}
//   {"op": "many", "name", "topic", "partition", "count", "prefix"}  count back-to-back
//                                                     transactions of one record "<prefix><i>" each
//   {"op": "consume", "group", "topics", "count", "readUncommitted"?}  a group consumer from the
//                                                     beginning until count records: [[topic, partition, offset, value]]
//   {"op": "fetchOffsets", "group", "topic"}          admin.fetchOffsets: [[partition, offset]]
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const CONSUME_TIMEOUT_MS = 20000

const kafka = new Kafka({
  clientId: 'kafkad-compat-txn',
  brokers: [process.argv[2]],
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) =>
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`),
  retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 },
  connectionTimeout: 5000,
  requestTimeout: 10000
})

const producers = {} // name -> { producer, txn }

function errorOf (err) {
  // Retries and aggregates wrap the protocol error that decided the outcome.
  let inner = err
  while (!inner.type && (inner.originalError || (inner.errors && inner.errors[0]))) {
    inner = inner.originalError || inner.errors[0]
  }
  return { name: err.name, type: inner.type || null, message: err.message }
}

const OPS = {
  async producer (o) {
    const producer = kafka.producer({
      transactionalId: o.tid,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: o.timeoutMs || 60000,
      allowAutoTopicCreation: false
    })
    await producer.connect()
    producers[o.name] = { producer, txn: null }
    return true
  },
  async begin (o) {
    const p = producers[o.name]
    p.txn = await p.producer.transaction()
    return true
  },
  async send (o) {
    const meta = await producers[o.name].txn.send({
      topic: o.topic,
      acks: -1,
      messages: o.messages.map((m) => ({ value: m.value, partition: m.partition }))
    })
    return meta.map((m) => [m.partition, m.errorCode, Number(m.baseOffset)])
  },
  async sendOffsets (o) {
    await producers[o.name].txn.sendOffsets({ consumerGroupId: o.group, topics: o.topics })
    return true
  },
  async commit (o) {
    await producers[o.name].txn.commit()
    return true
  },
  async abort (o) {
    await producers[o.name].txn.abort()
    return true
  },
  async many (o) {
    const p = producers[o.name]
    for (let i = 0; i < o.count; i++) {
      const txn = await p.producer.transaction()
      await txn.send({
        topic: o.topic,
        acks: -1,
        messages: [{ value: `${o.prefix}${i}`, partition: o.partition }]
      })
      await txn.commit()
    }
    return o.count
  },
  async consume (o) {
    const consumer = kafka.consumer({
      groupId: o.group,
      readUncommitted: Boolean(o.readUncommitted),
      sessionTimeout: 6000,
      heartbeatInterval: 500,
      rebalanceTimeout: 10000,
      maxWaitTimeInMs: 200
    })
    await consumer.connect()
    const got = []
    try {
      await consumer.subscribe({ topics: o.topics, fromBeginning: true })
      await new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`consumed ${got.length} of ${o.count} in ${CONSUME_TIMEOUT_MS} ms`)),
          CONSUME_TIMEOUT_MS
        )
        consumer.run({
          autoCommit: false,
          eachMessage: async ({ topic, partition, message }) => {
            got.push([topic, partition, Number(message.offset), message.value.toString()])
            if (got.length >= o.count) {
              clearTimeout(timer)
              resolve()
            }
          }
        }).catch(reject)
      })
    } finally {
      await consumer.disconnect()
    }
    return got
  },
  async fetchOffsets (o) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      const [t] = await admin.fetchOffsets({ groupId: o.group, topics: [o.topic] })
      return t.partitions.map((p) => [p.partition, Number(p.offset)])
    } finally {
      await admin.disconnect()
    }
  }
}

async function main () {
  const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n')
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (!line.trim()) continue
    const o = JSON.parse(line)
    try {
      emit({ ok: await OPS[o.op](o) })
    } catch (err) {
      emit({ error: errorOf(err) })
    }
  }
  // stdin closed: leave politely (a test that wants a vanished producer kills us instead)
  for (const { producer } of Object.values(producers)) await producer.disconnect()
}

main().catch((err) => {
  process.stderr.write(`fatal ${err.stack}\n`)
  process.exitCode = 1
})
