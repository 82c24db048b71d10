// Produces with a KafkaJS idempotent producer and prints the outcome as one JSON line.
//
//   node idempotent.mjs '{"brokers": ["127.0.0.1:9092"], "topic": "t", "count": 100, "perSend": 10}'
//
// Owned by tests/integration/test_idempotent.py. Creates the topic (one partition), then sends
// `count` messages with values "kafkajs-<i>", `perSend` messages per send() call, with
// idempotent: true (KafkaJS asks for a producer id with InitProducerId and numbers its
// batches). Prints {"ok": true, "baseOffsets": [...]} or {"ok": false, "error": {...}}.
// KafkaJS logs go to stderr so stdout carries only the JSON line.

import kafkajs from 'kafkajs';

const { Kafka, logLevel } = kafkajs;

const spec = JSON.parse(process.argv[2]);
const kafka = new Kafka({
  clientId: 'josefk-idempotent-test',
  brokers: spec.brokers,
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) => {
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`);
  },
  retry: { retries: 5 },
});

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: spec.topic, numPartitions: 1, replicationFactor: 1 }],
    });
  } finally {
    await admin.disconnect();
  }
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const baseOffsets = [];
  try {
    for (let start = 0; start < spec.count; start += spec.perSend) {
      const messages = [];
      for (let i = start; i < Math.min(spec.count, start + spec.perSend); i++) {
        messages.push({ value: `kafkajs-${i}`, partition: 0 });
      }
      const result = await producer.send({ topic: spec.topic, acks: -1, messages });
      baseOffsets.push(Number(result[0].baseOffset));
    }
  } finally {
    await producer.disconnect();
  }
  return baseOffsets;
}

main().then(
  (baseOffsets) => process.stdout.write(JSON.stringify({ ok: true, baseOffsets }) + '\n'),
  (error) => {
    process.stdout.write(
      JSON.stringify({
        ok: false,
        error: { name: error?.name ?? null, message: error?.message ?? String(error), type: error?.type ?? null },
      }) + '\n',
    );
    process.exitCode = 1;
  },
);
