// Runs a list of KafkaJS actions against a broker and prints the results as one JSON line.
//
//   node kafkajs_actions.mjs '{"brokers": ["127.0.0.1:9092"], "actions": [{"op": ...}, ...]}'
//
// Owned by josefk's integration tests (tests/integration/test_kafkajs.py), which build the
// action list and check the results. Each action reports {"op", "ok": true, "result"} or
// {"op", "ok": false, "error": {name, message, type, code}}; an action that fails stops the run
// so later ones do not report errors that are only consequences. KafkaJS logs go to stderr so
// stdout carries nothing but the JSON line.

import kafkajs from 'kafkajs';

const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = kafkajs;

const COMPRESSION = {
  NONE: CompressionTypes.None,
  GZIP: CompressionTypes.GZIP,
  // KafkaJS ships only GZIP; Snappy, LZ4 and ZSTD need codec packages that are not installed.
};

const stderrLogger = () => ({ namespace, level, label, log }) => {
  process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`);
};

function describeError(error) {
  return {
    name: error?.name ?? null,
    message: error?.message ?? String(error),
    type: error?.type ?? null,
    code: error?.code ?? null,
    retriable: error?.retriable ?? null,
    cause: error?.cause ? describeError(error.cause) : null,
  };
}

function toMessage(m) {
  const message = { key: m.key ?? null, value: m.value ?? null, partition: m.partition ?? 0 };
  if (m.timestamp !== undefined) message.timestamp = String(m.timestamp);
  if (m.headers) message.headers = m.headers;
  return message;
}

async function withAdmin(kafka, fn) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

const ACTIONS = {
  async createTopics(kafka, a) {
    return withAdmin(kafka, (admin) =>
      admin.createTopics({
        validateOnly: a.validateOnly ?? false,
        waitForLeaders: true,
        timeout: 15000,
        topics: a.topics.map((t) => ({
          topic: t.topic,
          numPartitions: t.numPartitions ?? 1,
          replicationFactor: 1,
          configEntries: Object.entries(t.configs ?? {}).map(([name, value]) => ({ name, value })),
        })),
      }),
    );
  },

  async listTopics(kafka) {
    return withAdmin(kafka, (admin) => admin.listTopics());
  },

  async fetchTopicMetadata(kafka, a) {
    return withAdmin(kafka, (admin) => admin.fetchTopicMetadata({ topics: a.topics }));
  },

  async describeCluster(kafka) {
    return withAdmin(kafka, (admin) => admin.describeCluster());
  },

  async describeConfigs(kafka, a) {
    return withAdmin(kafka, (admin) =>
      admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: a.topic }],
      }),
    );
  },

  async alterConfigs(kafka, a) {
    return withAdmin(kafka, (admin) =>
      admin.alterConfigs({
        validateOnly: false,
        resources: [
          {
            type: ConfigResourceTypes.TOPIC,
            name: a.topic,
            configEntries: Object.entries(a.configs).map(([name, value]) => ({ name, value })),
          },
        ],
      }),
    );
  },

  async createPartitions(kafka, a) {
    return withAdmin(kafka, (admin) =>
      admin.createPartitions({ timeout: 15000, topicPartitions: [{ topic: a.topic, count: a.count }] }),
    );
  },

  async deleteTopicRecords(kafka, a) {
    // KafkaJS looks up the leaders before loading the topic's metadata: load it first.
    return withAdmin(kafka, async (admin) => {
      await admin.fetchTopicOffsets(a.topic);
      return admin.deleteTopicRecords({ topic: a.topic, partitions: a.partitions });
    });
  },

  async deleteTopics(kafka, a) {
    return withAdmin(kafka, (admin) => admin.deleteTopics({ topics: a.topics, timeout: 15000 }));
  },

  async fetchTopicOffsets(kafka, a) {
    return withAdmin(kafka, (admin) => admin.fetchTopicOffsets(a.topic));
  },

  async fetchTopicOffsetsByTimestamp(kafka, a) {
    return withAdmin(kafka, (admin) => admin.fetchTopicOffsetsByTimestamp(a.topic, a.timestamp));
  },

  async send(kafka, a) {
    const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: true });
    await producer.connect();
    try {
      return await producer.send({
        topic: a.topic,
        acks: a.acks ?? -1,
        timeout: 15000,
        compression: COMPRESSION[a.compression ?? 'NONE'],
        messages: a.messages.map(toMessage),
      });
    } finally {
      await producer.disconnect();
    }
  },

  // KafkaJS has no manual assignment: its consumer always joins a group.
  async consume(kafka, a) {
    const consumer = kafka.consumer({
      groupId: a.groupId,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      maxWaitTimeInMs: 100,
      retry: { retries: 1 },
    });
    await consumer.connect();
    const got = [];
    try {
      await consumer.subscribe({ topic: a.topic, fromBeginning: true });
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`consumed ${got.length} of ${a.count}`)), a.timeoutMs ?? 20000);
        consumer.on(consumer.events.CRASH, (event) => {
          clearTimeout(timer);
          reject(event.payload.error);
        });
        consumer
          .run({
            eachMessage: async ({ partition, message }) => {
              got.push({
                partition,
                offset: message.offset,
                key: message.key?.toString() ?? null,
                value: message.value?.toString() ?? null,
                timestamp: message.timestamp,
                headers: Object.fromEntries(
                  Object.entries(message.headers ?? {}).map(([k, v]) => [k, v?.toString() ?? null]),
                ),
              });
              if (got.length >= a.count) {
                clearTimeout(timer);
                resolve();
              }
            },
          })
          .catch(reject);
      });
      return got;
    } finally {
      await consumer.disconnect();
    }
  },
};

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const kafka = new Kafka({
    clientId: 'josefk-kafkajs',
    brokers: spec.brokers,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: spec.retries ?? 3, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
  });
  const results = [];
  for (const action of spec.actions) {
    const run = ACTIONS[action.op];
    if (!run) {
      results.push({ op: action.op, ok: false, error: { message: `unknown op ${action.op}` } });
      break;
    }
    try {
      const result = await run(kafka, action);
      results.push({ op: action.op, ok: true, result: result ?? null });
    } catch (error) {
      results.push({ op: action.op, ok: false, error: describeError(error) });
      break;
    }
  }
  process.stdout.write(`${JSON.stringify(results)}\n`);
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stdout.write(`${JSON.stringify([{ op: 'main', ok: false, error: describeError(error) }])}\n`);
    process.exit(1);
  },
);
