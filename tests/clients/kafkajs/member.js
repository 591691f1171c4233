// One kafkajs 2.x group member as a child process of tests/clients/ (the protocol of
// client_runners.MemberProcess): a JSON line whenever its generation, member id or
// assignment changes; stdin commands "commit P OFFSET", "committed", "close".
// kafkajs has one assignor (RoundRobinAssigner) and no static membership; its join event
// carries no generation, so the generation is the one its next heartbeat reports.
//
//   node member.js BOOTSTRAP GROUP TOPIC STRATEGY CLIENT_ID - SESSION_MS
const readline = require('readline');
const { Kafka, logLevel } = require('kafkajs');

const [broker, groupId, topic, , clientId, , sessionMs] = process.argv.slice(2);
const kafka = new Kafka({
  clientId, brokers: [broker], logLevel: logLevel.NOTHING,
  retry: { retries: 5, initialRetryTime: 100 },
});
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

async function main() {
  const consumer = kafka.consumer({
    groupId, sessionTimeout: Number(sessionMs), heartbeatInterval: 300,
    rebalanceTimeout: 10000, maxWaitTimeInMs: 100,
  });
  let joined = null;
  let joins = 0;
  let last = '';
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    joined = e.payload;
    joins += 1;
  });
  consumer.on(consumer.events.HEARTBEAT, (e) => {
    if (!joined) return;
    const partitions = [...(joined.memberAssignment[topic] || [])].sort((a, b) => a - b);
    const generation = e.payload.groupGenerationId;
    const key = JSON.stringify([generation, joined.memberId, partitions, joins]);
    if (key !== last) {
      last = key;
      emit({ event: 'assigned', generation, memberId: joined.memberId, partitions,
             rebalances: joins });
    }
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic] });
  await consumer.run({ autoCommit: false, eachMessage: async () => {} });
  // Paused: it joins and heartbeats but fetches nothing. Kafka's partitions are empty, a
  // fetch from a committed offset past their end is out of range there, and kafkajs then
  // commits its default offset over the one committed
  consumer.pause([{ topic }]);
  const admin = kafka.admin();
  await admin.connect();
  const lines = readline.createInterface({ input: process.stdin });
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await admin.disconnect();
    await consumer.disconnect();
    emit({ event: 'closed' });
    process.exit(0);
  };
  lines.on('close', close);
  for await (const line of lines) {
    const w = line.trim().split(/\s+/);
    if (w[0] === 'close') {
      await close();
    } else if (w[0] === 'commit') {
      try {
        await consumer.commitOffsets([{ topic, partition: Number(w[1]), offset: w[2] }]);
        emit({ event: 'committed', error: null });
      } catch (e) {
        emit({ event: 'committed', error: e.type || e.name });
      }
    } else if (w[0] === 'committed') {
      const mine = ((joined && joined.memberAssignment[topic]) || []).map(String);
      const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
      const offsets = {};
      for (const p of t.partitions) {
        if (mine.includes(String(p.partition))) {
          offsets[p.partition] = Number(p.offset) === -1 ? null : Number(p.offset);
        }
      }
      emit({ event: 'offsets', offsets });
    }
  }
}

main().catch((e) => { console.error((e && e.stack) || e); process.exit(1); });
