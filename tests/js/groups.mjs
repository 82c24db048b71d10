// One KafkaJS group consumer, driven by josefk's group integration tests
// (tests/integration/test_groups.py).
//
//   node groups.mjs '{"brokers": [...], "topic": "t", "groupId": "g", "sessionTimeout": 6000}'
//
// Prints one JSON line per event on stdout: {"event": "join", "memberId", "assignment":
// [partitions]} after each rebalance, {"event": "message", "partition", "offset"} for each
// message, and {"event": "stopped"} after a clean leave. Reading "stop" on stdin makes the
// consumer leave the group (disconnect) and exit; the test kills the process to make it die
// without leaving. KafkaJS logs go to stderr.

import kafkajs from 'kafkajs';
import readline from 'node:readline';

const { Kafka, logLevel } = kafkajs;
const spec = JSON.parse(process.argv[2]);

const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n');

const kafka = new Kafka({
  clientId: 'josefk-groups-js',
  brokers: spec.brokers,
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) => {
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`);
  },
  retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
});

const consumer = kafka.consumer({
  groupId: spec.groupId,
  sessionTimeout: spec.sessionTimeout ?? 6000,
  heartbeatInterval: spec.heartbeatInterval ?? 500,
  rebalanceTimeout: spec.rebalanceTimeout ?? 10000,
  maxWaitTimeInMs: 100,
});

consumer.on(consumer.events.GROUP_JOIN, (e) => {
  const assignment = e.payload.memberAssignment[spec.topic] ?? [];
  emit({ event: 'join', memberId: e.payload.memberId, assignment: [...assignment].sort() });
});

await consumer.connect();
await consumer.subscribe({ topics: [spec.topic], fromBeginning: true });
await consumer.run({
  autoCommit: true,
  autoCommitInterval: 200,
  eachMessage: async ({ partition, message }) => {
    emit({ event: 'message', partition, offset: Number(message.offset) });
  },
});

const input = readline.createInterface({ input: process.stdin });
input.on('line', async (line) => {
  if (line.trim() === 'stop') {
    await consumer.disconnect();
    emit({ event: 'stopped' });
    process.exit(0);
  }
});
