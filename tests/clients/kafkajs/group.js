// A kafkajs 2.x consumer against `offsetlog serve` or Kafka (run by test_kafkajs.py): join a
// group, commit offsets as its member, fetch them back with the admin client, and print
// what it saw as one JSON line. With a 4th argument `keep-fetching` it is not paused after
// joining and fetches for 3 s after its commit.
const { Kafka, logLevel } = require('kafkajs');

const [broker, groupId, topic, keepFetching] = process.argv.slice(2);
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
  // Paused, so it fetches no more: Kafka's partitions are empty, a fetch from 42 is out of
  // range there, and kafkajs then commits its default offset (-2) over ours
  // (test_kafkajs_commits_its_default_offset_when_out_of_range)
  if (keepFetching !== 'keep-fetching') consumer.pause([{ topic }]);
  await consumer.commitOffsets([
    { topic, partition: 0, offset: '42' },
    { topic, partition: 1, offset: '7' },
  ]);
  if (keepFetching === 'keep-fetching') await sleep(3000);
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
