// A Go client, sarama (Debian's golang-github-shopify-sarama-dev, 1.22), driven by
// tests/integration/test_sarama.py against a real josefk broker.
//
// Usage: sarama-actions BROKER < spec.json, where the spec is one action:
//
//	{"op": "produce", "topic": T, "acks": -1|1, "compression": "none|gzip|snappy|lz4|zstd",
//	 "idempotent": bool, "messages": [{"key", "value", "headers", "timestamp"}]}
//	{"op": "consume", "topic": T, "partition": P, "count": N}
//	{"op": "group", "topic": T, "group": G, "count": N}
//	{"op": "metadata", "topic": T}
//
// Keys, values and header values are base64 in JSON (encoding/json's []byte), null for null.
// It prints one JSON object: {"ok": true, "result": ...} or {"ok": false, "error": "..."}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type message struct {
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []header `json:"headers"`
	Timestamp int64    `json:"timestamp"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
}

type spec struct {
	Op          string    `json:"op"`
	Topic       string    `json:"topic"`
	Partition   int32     `json:"partition"`
	Count       int       `json:"count"`
	Group       string    `json:"group"`
	Acks        int16     `json:"acks"`
	Compression string    `json:"compression"`
	Idempotent  bool      `json:"idempotent"`
	Messages    []message `json:"messages"`
}

const timeout = 20 * time.Second

func config(s spec) (*sarama.Config, error) {
	c := sarama.NewConfig()
	// The newest version sarama 1.22 knows but one: Produce v7, Fetch v10, Metadata v5.
	// Kafka 4 removed the versions of older releases (KIP-896), as josefk does.
	c.Version = sarama.V2_1_0_0
	c.ClientID = "josefk-sarama-test"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.RequiredAcks(s.Acks)
	c.Producer.Timeout = timeout
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	// sarama 1.22 commits with OffsetCommit v1 unless a retention is set, and v2 then:
	// Kafka 4 (and josefk) no longer take v0-v1 (KIP-896), so a group must set one.
	c.Consumer.Offsets.Retention = 24 * time.Hour
	codecs := map[string]sarama.CompressionCodec{
		"": sarama.CompressionNone, "none": sarama.CompressionNone,
		"gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
		"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
	}
	codec, known := codecs[s.Compression]
	if !known {
		return nil, fmt.Errorf("unknown compression %q", s.Compression)
	}
	c.Producer.Compression = codec
	if s.Idempotent {
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
	}
	return c, nil
}

func bytesOrNil(b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	return sarama.ByteEncoder(b)
}

func produce(brokers []string, s spec) (interface{}, error) {
	c, err := config(s)
	if err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(brokers, c)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	batch := make([]*sarama.ProducerMessage, 0, len(s.Messages))
	for _, m := range s.Messages {
		pm := &sarama.ProducerMessage{
			Topic: s.Topic, Key: bytesOrNil(m.Key), Value: bytesOrNil(m.Value),
			Partition: m.Partition,
		}
		if m.Timestamp > 0 {
			pm.Timestamp = time.Unix(0, m.Timestamp*int64(time.Millisecond))
		}
		for _, h := range m.Headers {
			pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		batch = append(batch, pm)
	}
	if err := p.SendMessages(batch); err != nil {
		if failed, ok := err.(sarama.ProducerErrors); ok && len(failed) > 0 {
			// The broker's own error, not only how many messages it concerns.
			return nil, fmt.Errorf("%v: %v", err, failed[0].Err)
		}
		return nil, err
	}
	out := make([]message, len(batch))
	for i, pm := range batch {
		out[i] = message{Partition: pm.Partition, Offset: pm.Offset}
	}
	return out, nil
}

func fromConsumer(m *sarama.ConsumerMessage) message {
	out := message{
		Key: m.Key, Value: m.Value, Partition: m.Partition, Offset: m.Offset,
		Timestamp: m.Timestamp.UnixNano() / int64(time.Millisecond), Headers: []header{},
	}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, header{Key: string(h.Key), Value: h.Value})
	}
	return out
}

func consume(brokers []string, s spec) (interface{}, error) {
	c, err := config(s)
	if err != nil {
		return nil, err
	}
	consumer, err := sarama.NewConsumer(brokers, c)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(s.Topic, s.Partition, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	out := []message{}
	deadline := time.After(timeout)
	for len(out) < s.Count {
		select {
		case m := <-pc.Messages():
			out = append(out, fromConsumer(m))
		case e := <-pc.Errors():
			return nil, e
		case <-deadline:
			return nil, fmt.Errorf("%d of %d messages within %s", len(out), s.Count, timeout)
		}
	}
	return out, nil
}

type claims struct {
	mu       sync.Mutex
	got      []message
	want     int
	done     chan struct{}
	doneOnce sync.Once
}

func (h *claims) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *claims) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *claims) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		session.MarkMessage(m, "")
		h.mu.Lock()
		h.got = append(h.got, fromConsumer(m))
		enough := len(h.got) >= h.want
		h.mu.Unlock()
		if enough {
			h.doneOnce.Do(func() { close(h.done) })
		}
	}
	return nil
}

func group(brokers []string, s spec) (interface{}, error) {
	c, err := config(s)
	if err != nil {
		return nil, err
	}
	// Commit what was marked at once on close, not after the default second.
	c.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	g, err := sarama.NewConsumerGroup(brokers, s.Group, c)
	if err != nil {
		return nil, err
	}
	h := &claims{want: s.Count, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	failed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{s.Topic}, h); err != nil && ctx.Err() == nil {
				failed <- err
				return
			}
		}
	}()
	select {
	case <-h.done:
	case err := <-failed:
		g.Close()
		return nil, err
	case <-ctx.Done():
		g.Close()
		return nil, fmt.Errorf("%d of %d messages within %s", len(h.got), s.Count, timeout)
	}
	cancel()
	if err := g.Close(); err != nil { // leaves the group, commits what was marked
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got, nil
}

func metadata(brokers []string, s spec) (interface{}, error) {
	c, err := config(s)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(brokers, c)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	partitions, err := client.Partitions(s.Topic)
	if err != nil {
		return nil, err
	}
	controller, err := client.Controller()
	if err != nil {
		return nil, err
	}
	newest, err := client.GetOffset(s.Topic, 0, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	return map[string]interface{}{
		"partitions": partitions, "controller": controller.ID(), "newest_offset_0": newest,
	}, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sarama-actions BROKER < spec.json")
		os.Exit(2)
	}
	var s spec
	result, err := interface{}(nil), json.NewDecoder(os.Stdin).Decode(&s)
	if err == nil {
		brokers := []string{os.Args[1]}
		switch s.Op {
		case "produce":
			result, err = produce(brokers, s)
		case "consume":
			result, err = consume(brokers, s)
		case "group":
			result, err = group(brokers, s)
		case "metadata":
			result, err = metadata(brokers, s)
		default:
			err = errors.New("unknown op " + s.Op)
		}
	}
	answer := map[string]interface{}{"ok": err == nil, "result": result}
	if err != nil {
		answer["error"] = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(answer); err != nil {
		os.Exit(1)
	}
}
