// A kafkajs group consumer for test_groups.py: node group_consumer.js BOOTSTRAP TOPIC GROUP
// Commits each record's offset (autoCommitThreshold 1 is not synchronous, so commit by hand)
// before printing {"ev": "rec", "p", "o", "v"}; SIGTERM disconnects (leaving the group).
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, group] = process.argv.slice(2)
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n')

async function main () {
  const kafka = new Kafka({ clientId: 'kafkad-compat', brokers: [bootstrap], logLevel: logLevel.WARN })
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  emit({ ev: 'start' })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
      emit({ ev: 'rec', p: partition, o: Number(message.offset), v: message.value.toString() })
    }
  })
  process.on('SIGTERM', async () => {
    await consumer.disconnect()
    process.exit(0)
  })
}

main().catch((e) => { process.stderr.write(String(e.stack) + '\n'); process.exit(1) })
