// Drives unmodified kafkajs for tests/e2e/test_kafkajs.py: one JSON request per stdin line, one JSON reply per
// stdout line ({id, result} or {id, error}). The tests hold all the assertions; this only calls kafkajs and
// reports what kafkajs returned or handed to the application, so that a test reads as the kafkajs calls it makes.
//
// Usage: node driver.mjs BOOTSTRAP
// Records cross the pipe as {key, value, headers, partition, timestamp} with strings (or null) for key, value
// and header values; offsets and timestamps come back as numbers.
import { createInterface } from 'node:readline'
import kafkajs from 'kafkajs'

const { Kafka, CompressionTypes, logLevel } = kafkajs

// kafkajs logs to stdout by default, which is the reply channel here: its log goes to stderr instead.
const logCreator = () => ({ namespace, level, log }) =>
  process.stderr.write(`${new Date().toISOString()} ${namespace} ${logLevel[level] ?? level} ${log.message} ${JSON.stringify(log)}\n`)

const kafka = new Kafka({
  clientId: 'odradek-e2e-kafkajs',
  brokers: [process.argv[2]],
  logLevel: logLevel.WARN,
  logCreator,
})

const admin = kafka.admin()
const producers = new Map()
const consumers = new Map()

const text = buffer => (buffer === null || buffer === undefined ? null : buffer.toString('utf8'))

const received = (topic, partition, message) => ({
  topic,
  partition,
  offset: Number(message.offset),
  key: text(message.key),
  value: text(message.value),
  headers: Object.fromEntries(
    Object.entries(message.headers ?? {}).map(([name, value]) => [name, Array.isArray(value) ? value.map(text) : text(value)])
  ),
  timestamp: Number(message.timestamp),
})

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

const ops = {
  // Any kafkajs admin method, by name, with its arguments as kafkajs documents them.
  async admin({ method, args = [] }) {
    return admin[method](...args)
  },

  // producer.send through a named producer (kept, so an idempotent producer keeps its producer id across sends).
  async produce({ producer: name = 'default', config = {}, send }) {
    if (!producers.has(name)) {
      const producer = kafka.producer(config)
      await producer.connect()
      producers.set(name, producer)
    }
    const { compression = 'None', ...rest } = send
    return producers.get(name).send({ ...rest, compression: CompressionTypes[compression] })
  },

  async 'producer.stop'({ producer: name }) {
    await producers.get(name).disconnect()
    producers.delete(name)
    return null
  },

  // A group member: subscribe and consumer.run with eachMessage, buffering what it hands over.
  async 'consumer.start'({ name, config, subscribe }) {
    const consumer = kafka.consumer(config)
    const state = { consumer, messages: [], joins: [], crashes: [] }
    consumers.set(name, state)
    const { GROUP_JOIN, CRASH } = consumer.events
    consumer.on(GROUP_JOIN, ({ payload }) => state.joins.push(payload))
    consumer.on(CRASH, ({ payload }) => state.crashes.push(String(payload.error)))
    await consumer.connect()
    await consumer.subscribe(subscribe)
    await consumer.run({ eachMessage: async ({ topic, partition, message }) => state.messages.push(received(topic, partition, message)) })
    return null
  },

  // Everything the member was handed since the last take, once at least `count` arrived or `timeoutMs` passed.
  async 'consumer.take'({ name, count, timeoutMs = 15000 }) {
    const state = consumers.get(name)
    const deadline = Date.now() + timeoutMs
    while (state.messages.length < count && Date.now() < deadline) await sleep(20)
    return state.messages.splice(0)
  },

  // The member's GROUP_JOIN events (one per completed rebalance), once there are at least `count`.
  async 'consumer.joins'({ name, count = 1, timeoutMs = 15000 }) {
    const state = consumers.get(name)
    const deadline = Date.now() + timeoutMs
    while (state.joins.length < count && Date.now() < deadline) await sleep(20)
    return { joins: state.joins, crashes: state.crashes }
  },

  async 'consumer.stop'({ name }) {
    await consumers.get(name).consumer.disconnect()
    consumers.delete(name)
    return null
  },
}

async function closeAll() {
  await Promise.allSettled([...consumers.values()].map(({ consumer }) => consumer.disconnect()))
  await Promise.allSettled([...producers.values()].map(producer => producer.disconnect()))
  await admin.disconnect()
}

await admin.connect()
const reply = message => process.stdout.write(JSON.stringify(message) + '\n')
for await (const line of createInterface({ input: process.stdin })) {
  const { id, op, args } = JSON.parse(line)
  try {
    reply({ id, result: (await ops[op](args)) ?? null })
  } catch (error) {
    reply({ id, error: { name: error.name, type: error.type ?? null, message: error.message } })
  }
}
await closeAll()
