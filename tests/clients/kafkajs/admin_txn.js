// kafkajs 2.x transactional offsets and offset admin against `offsetlog serve` or Kafka (run
// by tests/clients/test_kafkajs.py): a transaction's sendOffsets committed, another aborted, then the
// admin's setOffsets and resetOffsets on the (memberless) group, fetching after each step.
// Prints what it saw as one JSON line.
const { Kafka, logLevel } = require('kafkajs');

const [broker, groupId, topic, transactionalId] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: 'kafkajs-test', brokers: [broker], logLevel: logLevel.ERROR,
  retry: { retries: 5, initialRetryTime: 100 },
});

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const fetch = async () => {
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return Object.fromEntries(t.partitions.map((p) => [p.partition, Number(p.offset)]));
  };
  // Kafka writes a transaction's markers after it answers EndTxn, and kafkajs cannot ask
  // for stable offsets: after a commit, fetch again (up to 10 s) until its offset shows
  const fetchUntil = async (partition, offset) => {
    for (let i = 0; ; i++) {
      const got = await fetch();
      if (got[partition] === offset || i >= 200) return got;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const steps = {};
  const offsets = (offset) => ({
    consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset }] }],
  });
  let txn = await producer.transaction();
  await txn.sendOffsets(offsets('55'));
  await txn.commit();
  steps.committed = await fetchUntil(0, 55);
  txn = await producer.transaction();
  await txn.sendOffsets(offsets('66'));
  await txn.abort();
  steps.aborted = await fetch();
  await producer.disconnect();
  await admin.setOffsets({ groupId, topic, partitions: [{ partition: 2, offset: '9' }] });
  steps.set = await fetch();
  await admin.resetOffsets({ groupId, topic, earliest: true });
  steps.reset = await fetch();
  await admin.disconnect();
  console.log(JSON.stringify(steps));
}

main().catch((e) => { console.error((e && e.stack) || e); process.exit(1); });
