// Two kafkajs 2.x consumers in one group against `offsetlog serve` or Kafka (run by
// tests/clients/test_kafkajs.py): the first takes every partition, the group rebalances when the
// second joins, and again when it leaves. Prints the assignments each saw at each step as one
// JSON line.
const { Kafka, logLevel } = require('kafkajs');

const [broker, groupId, topic] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: 'kafkajs-test', brokers: [broker], logLevel: logLevel.NOTHING,
  retry: { retries: 5, initialRetryTime: 100 },
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function member(name, seen) {
  const consumer = kafka.consumer({
    groupId, sessionTimeout: 6000, heartbeatInterval: 300, rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200,
  });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    seen[name] = { partitions: e.payload.memberAssignment[topic] || [],
                   leader: e.payload.isLeader, joins: ((seen[name] || {}).joins || 0) + 1 };
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic] });
  await consumer.run({ autoCommit: false, eachMessage: async () => {} });
  return consumer;
}

async function until(check) {
  for (let i = 0; i < 400 && !check(); i++) await sleep(50);
  if (!check()) throw new Error('timed out waiting');
}

const copy = (x) => JSON.parse(JSON.stringify(x));

async function main() {
  const seen = {};
  const a = await member('a', seen);
  await until(() => seen.a && seen.a.partitions.length === 4);
  const alone = copy(seen);
  const b = await member('b', seen);
  await until(() => seen.b && seen.a.joins > alone.a.joins
              && seen.a.partitions.length + seen.b.partitions.length === 4
              && seen.b.partitions.length > 0);
  const both = copy(seen);
  await b.disconnect();
  await until(() => seen.a.joins > both.a.joins && seen.a.partitions.length === 4);
  const after = copy(seen);
  await a.disconnect();
  console.log(JSON.stringify({ alone, both, after }));
}

main().catch((e) => { console.error((e && e.stack) || e); process.exit(1); });
