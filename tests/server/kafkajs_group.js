// A kafkajs 2.x consumer against `offsetlog serve` (run by test_wire_kafkajs.py): join a
// group, commit offsets as its member, fetch them back with the admin client, and print
// what it saw as one JSON line.
const { Kafka, logLevel } = require('kafkajs');

const [broker, groupId, topic] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: 'kafkajs-test', brokers: [broker], logLevel: logLevel.ERROR,
  retry: { retries: 5, initialRetryTime: 100 },
});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const consumer = kafka.consumer({
    groupId, sessionTimeout: 6000, heartbeatInterval: 300, rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200,
  });
  let joined = null;
  consumer.on(consumer.events.GROUP_JOIN, (e) => { joined = e.payload; });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({ autoCommit: false, eachMessage: async () => {} });
  for (let i = 0; i < 400 && !joined; i++) await sleep(50);
  if (!joined) throw new Error('no GROUP_JOIN within 20 s');
  await consumer.commitOffsets([
    { topic, partition: 0, offset: '42' },
    { topic, partition: 1, offset: '7' },
  ]);
  const admin = kafka.admin();
  await admin.connect();
  const fetched = await admin.fetchOffsets({ groupId, topics: [topic] });
  const groups = await admin.describeGroups([groupId]);
  await admin.disconnect();
  await consumer.disconnect();
  console.log(JSON.stringify({
    memberId: joined.memberId, leaderId: joined.leaderId, protocol: joined.groupProtocol,
    assignment: joined.memberAssignment, fetched, described: groups.groups[0].state,
  }));
}

main().catch((e) => { console.error((e && e.stack) || e); process.exit(1); });
