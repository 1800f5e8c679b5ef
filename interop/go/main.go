// Command matrix runs one scenario of the Comet interop matrix (interop/matrix.sh) with the real
// rocketmq-client-go v2 client against a running name server and broker.
//
// Usage: matrix <scenario> <namesrv host:port> <suffix>. Every topic and group name ends with the
// suffix so that scenarios run in parallel against one broker. Topics are created through the Go
// admin API, which needs a broker address: it is read from MATRIX_BROKER_ADDR. The last lines
// printed are "CHECKS <n>" and "PASS <scenario>", or "FAIL <scenario>: <first failing check>"; the
// exit code is 0 only on PASS, and the harness also requires n > 0.
//
// Waits are condition polls bounded by stepTimeout; nothing passes because time went by. The
// only fixed pause is the one-second boundary of the TIMESTAMP scenario (consumeTimestamp has a
// resolution of one second).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	// queues of every topic a scenario creates (the client default is 4 as well)
	queues = 4
	// upper bound of every wait for a condition (delivery, route, rebalance)
	stepTimeout = 60 * time.Second
	// how often a waiting condition is re-evaluated
	pollEvery = 50 * time.Millisecond
	// producer send timeout: generous, the two cores are shared by several clients
	sendTimeout = 10 * time.Second
	// body length of the compression scenario; the client compresses bodies over 4096 bytes
	bigBodyLen = 8 * 1024
	// delay level of the delay scenario and the shortest delay it must have (broker default 5 s)
	delayLevel      = 2
	delayLevelMinMs = 5000
	// maxReconsumeTimes of the retry/DLQ scenario
	maxReconsume = 2
	// name prefix of a group's retry topic
	retryPrefix = "%RETRY%"
	// PermName.PERM_READ | PermName.PERM_WRITE
	permReadWrite = 6
	// environment variables holding "accessKey:secretKey" of the ACL broker's ordinary and admin
	// accounts (set by matrix.sh for the acl-* rows)
	aclUserEnv  = "MATRIX_ACL_USER"
	aclAdminEnv = "MATRIX_ACL_ADMIN"
	// scenarios that run against the ACL broker start with this
	aclScenarioPrefix = "acl-"
	// how the Go client words a broker refusal with ResponseCode.NO_PERMISSION
	noPermissionText = "CODE: 16"
)

// checkFailed is the row's first failing assertion.
type checkFailed struct{ what string }

func (c checkFailed) Error() string { return c.what }

type runner struct {
	scenario, namesrv, suffix, topic, group string
	brokerAddr                              string
	checks                                  int
	instances                               int32
	shutdowns                               []func()
	// signing accounts of the acl-* scenarios (nil otherwise)
	userCreds, adminCreds *primitive.Credentials
}

// aclCredentials reads "accessKey:secretKey" from env; nil when it is not set that way.
func aclCredentials(env, spoil string) *primitive.Credentials {
	ak, sk, ok := strings.Cut(os.Getenv(env), ":")
	if !ok || ak == "" {
		return nil
	}
	return &primitive.Credentials{AccessKey: ak, SecretKey: sk + spoil}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: matrix <scenario> <namesrv> <suffix>")
		os.Exit(2)
	}
	rlog.SetLogLevel("error")
	tag := strings.ReplaceAll(os.Args[1], "-", "_")
	r := &runner{
		scenario:   os.Args[1],
		namesrv:    os.Args[2],
		suffix:     os.Args[3],
		topic:      "MxT_" + tag + "_" + os.Args[3],
		group:      "MxG_" + tag + "_" + os.Args[3],
		brokerAddr: os.Getenv("MATRIX_BROKER_ADDR"),
	}
	if strings.HasPrefix(r.scenario, aclScenarioPrefix) {
		r.userCreds = aclCredentials(aclUserEnv, "")
		r.adminCreds = aclCredentials(aclAdminEnv, "")
	}
	err := r.run()
	for i := len(r.shutdowns) - 1; i >= 0; i-- {
		r.shutdowns[i]()
	}
	fmt.Printf("CHECKS %d\n", r.checks)
	if err != nil {
		fmt.Printf("FAIL %s: %s\n", r.scenario, strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
	fmt.Printf("PASS %s\n", r.scenario)
}

// run converts a failed check (a panic with checkFailed) into the returned error.
func (r *runner) run() (err error) {
	defer func() {
		if p := recover(); p != nil {
			if cf, ok := p.(checkFailed); ok {
				err = cf
				return
			}
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	scenarios := map[string]func() error{
		"send-sync":           r.sendSync,
		"send-async":          r.sendAsync,
		"send-oneway":         r.sendOneway,
		"send-batch":          r.sendBatch,
		"properties":          r.properties,
		"compressed-body":     r.compressedBody,
		"clustering":          r.clustering,
		"broadcasting":        r.broadcasting,
		"orderly":             r.orderly,
		"retry-dlq":           r.retryDlq,
		"delay-level":         r.delayLevel,
		"from-first-offset":   r.fromFirstOffset,
		"from-last-offset":    r.fromLastOffset,
		"from-timestamp":      r.fromTimestamp,
		"lite-pull-seek":      r.pullSeek,
		"pull-offset-restart": r.pullOffsetRestart,
		"tag-filter":          r.tagFilter,
		"transactions":        r.transactions,
		"acl-send-consume":    r.aclSendConsume,
		"acl-denied":          r.aclDenied,
	}
	if strings.HasPrefix(r.scenario, aclScenarioPrefix) {
		r.check(r.userCreds != nil && r.adminCreds != nil, "%s and %s hold accessKey:secretKey", aclUserEnv, aclAdminEnv)
	}
	f, ok := scenarios[r.scenario]
	if !ok {
		return fmt.Errorf("unknown scenario %s", r.scenario)
	}
	return f()
}

// ------------------------------------------------------------------ checks and waits

func (r *runner) check(ok bool, format string, args ...any) {
	r.checks++
	if !ok {
		panic(checkFailed{fmt.Sprintf(format, args...)})
	}
}

func (r *runner) await(cond func() bool, format string, args ...any) {
	deadline := time.Now().Add(stepTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			r.check(false, format+" (timed out after %s)", append(args, stepTimeout)...)
		}
		time.Sleep(pollEvery)
	}
	r.checks++
}

// ------------------------------------------------------------------ clients

func (r *runner) instance() string {
	return fmt.Sprintf("mx%d_%d", os.Getpid(), atomic.AddInt32(&r.instances, 1))
}

// producerOptions are the options of every producer of the row: its group, a fresh instance name,
// and the user account's credentials on the ACL rows.
func (r *runner) producerOptions(opts ...producer.Option) []producer.Option {
	all := []producer.Option{
		producer.WithNameServer([]string{r.namesrv}),
		producer.WithGroupName("MxP_" + strings.ReplaceAll(r.scenario, "-", "_") + "_" + r.suffix),
		producer.WithInstanceName(r.instance()),
		producer.WithSendMsgTimeout(sendTimeout),
		producer.WithRetry(2),
	}
	if r.userCreds != nil {
		all = append(all, producer.WithCredentials(*r.userCreds))
	}
	return append(all, opts...)
}

func (r *runner) producer(opts ...producer.Option) (rocketProducer, error) {
	p, err := producer.NewDefaultProducer(r.producerOptions(opts...)...)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	r.shutdowns = append(r.shutdowns, func() { _ = p.Shutdown() })
	return p, nil
}

type rocketProducer interface {
	SendSync(ctx context.Context, mq ...*primitive.Message) (*primitive.SendResult, error)
	SendAsync(ctx context.Context, f func(context.Context, *primitive.SendResult, error), mq ...*primitive.Message) error
	SendOneWay(ctx context.Context, mq ...*primitive.Message) error
}

// collector keeps everything a listener received, duplicates included.
type collector struct {
	mu   sync.Mutex
	msgs []*primitive.MessageExt
}

func (c *collector) add(msgs ...*primitive.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, msgs...)
}

func (c *collector) all() []*primitive.MessageExt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*primitive.MessageExt(nil), c.msgs...)
}

func (c *collector) bodies() map[string]int {
	out := map[string]int{}
	for _, m := range c.all() {
		out[string(m.Body)]++
	}
	return out
}

func (r *runner) awaitUnique(c *collector, n int, what string) {
	deadline := time.Now().Add(stepTimeout)
	for len(c.bodies()) < n {
		if time.Now().After(deadline) {
			got := make([]string, 0, n)
			for b := range c.bodies() {
				got = append(got, b)
			}
			sort.Strings(got)
			r.check(false, "%s (%d messages; timed out after %s with %v)", what, n, stepTimeout, got)
		}
		time.Sleep(pollEvery)
	}
	r.checks++
}

// tracker wraps AllocateByAveragely and remembers its last answer, to see when a rebalance settled.
type tracker struct {
	mu   sync.Mutex
	last []*primitive.MessageQueue
	cids int
}

func (t *tracker) allocate(group, cid string, mqAll []*primitive.MessageQueue, cidAll []string) []*primitive.MessageQueue {
	res := consumer.AllocateByAveragely(group, cid, mqAll, cidAll)
	// Clustering consumers also rebalance their group's retry topic (one queue); only the scenario
	// topic's allocation says whether the rebalance settled.
	if len(mqAll) == 0 || strings.HasPrefix(mqAll[0].Topic, retryPrefix) {
		return res
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = res
	t.cids = len(cidAll)
	return res
}

func (t *tracker) state() (map[int]bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := map[int]bool{}
	for _, mq := range t.last {
		ids[mq.QueueId] = true
	}
	return ids, t.cids
}

func (r *runner) awaitBalanced(consumers int, trackers ...*tracker) {
	r.await(func() bool {
		union := map[int]bool{}
		total := 0
		for _, t := range trackers {
			ids, cids := t.state()
			if cids != consumers {
				return false
			}
			for id := range ids {
				union[id] = true
			}
			total += len(ids)
		}
		return len(union) == queues && total == queues
	}, "rebalance gives the %d consumer(s) all %d queues without overlap", consumers, queues)
}

func (r *runner) pushConsumer(c *collector, expr string, opts ...consumer.Option) error {
	return r.pushConsumerWith(expr, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		c.add(msgs...)
		return consumer.ConsumeSuccess, nil
	}, opts...)
}

func (r *runner) pushConsumerWith(expr string, listener func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error), opts ...consumer.Option) error {
	all := append([]consumer.Option{
		consumer.WithNameServer([]string{r.namesrv}),
		consumer.WithGroupName(r.group),
		consumer.WithInstance(r.instance()),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	if r.userCreds != nil {
		all = append(all, consumer.WithCredentials(*r.userCreds))
	}
	c, err := consumer.NewPushConsumer(all...)
	if err != nil {
		return err
	}
	if err := c.Subscribe(r.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expr}, listener); err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	r.shutdowns = append(r.shutdowns, func() { _ = c.Shutdown() })
	return nil
}

// createTopic creates r.topic with `queues` queues at MATRIX_BROKER_ADDR and waits for its route.
func (r *runner) createTopic() {
	r.createNamedTopic(r.topic)
}

// createNamedTopic creates topic (as the admin account on the ACL rows) and waits for its route.
func (r *runner) createNamedTopic(topic string) {
	r.check(r.brokerAddr != "", "MATRIX_BROKER_ADDR is set")
	opts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver([]string{r.namesrv}))}
	if r.adminCreds != nil {
		opts = append(opts, admin.WithCredentials(*r.adminCreds))
	}
	adm, err := admin.NewAdmin(opts...)
	r.check(err == nil, "admin client: %v", err)
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if r.adminCreds != nil {
		// rocketmq-client-go 2.1.2's admin installs its signing hook only inside
		// GetAllSubscriptionGroup (CreateTopic goes out unsigned, and its answer code is not
		// checked): one signed admin call first makes every later request carry the signature.
		_, err := adm.GetAllSubscriptionGroup(ctx, r.brokerAddr, sendTimeout)
		r.check(err == nil, "signed admin call (GET_ALL_SUBSCRIPTIONGROUP_CONFIG): %v", err)
	}
	err = adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(r.brokerAddr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues), admin.WithPerm(permReadWrite))
	r.check(err == nil, "create topic %s: %v", topic, err)
	r.await(func() bool {
		mqs, err := adm.FetchPublishMessageQueues(context.Background(), topic)
		return err == nil && len(mqs) == queues
	}, "route of the new topic %s is published", topic)
}

func (r *runner) sendOk(p rocketProducer, m *primitive.Message) *primitive.SendResult {
	res, err := p.SendSync(context.Background(), m)
	r.check(err == nil, "send: %v", err)
	r.check(res.Status == primitive.SendOK, "send status %v", res.Status)
	return res
}

func (r *runner) sendNumbered(p rocketProducer, prefix string, n int) map[string]int {
	out := map[string]int{}
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("%s%d", prefix, i)
		r.sendOk(p, primitive.NewMessage(r.topic, []byte(body)))
		out[body] = 1
	}
	return out
}

// toQueue routes a message to one queue id with the manual queue selector.
func toQueue(m *primitive.Message, q *primitive.MessageQueue) *primitive.Message {
	m.Queue = q
	return m
}

func sameKeys(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func union(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k := range a {
		out[k] = 1
	}
	for k := range b {
		out[k] = 1
	}
	return out
}

// ------------------------------------------------------------------ scenarios: produce side

func (r *runner) sendSync() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	const count = 8
	sent := map[string]string{}
	offsets := map[int][]int64{}
	for i := 0; i < count; i++ {
		body := fmt.Sprintf("sync-%d", i)
		res := r.sendOk(p, primitive.NewMessage(r.topic, []byte(body)))
		r.check(res.MsgID != "", "send %d has a msgId", i)
		r.check(res.OffsetMsgID != "", "send %d has an offsetMsgId", i)
		r.check(res.MessageQueue != nil && res.MessageQueue.Topic == r.topic, "send %d queue topic", i)
		offsets[res.MessageQueue.QueueId] = append(offsets[res.MessageQueue.QueueId], res.QueueOffset)
		sent[res.MsgID] = body
	}
	for q, offs := range offsets {
		for i, o := range offs {
			r.check(o == int64(i), "queue %d offsets %v are 0,1,2...", q, offs)
		}
	}
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	r.awaitUnique(c, count, "sync messages delivered")
	for _, m := range c.all() {
		r.check(sent[m.MsgId] == string(m.Body), "delivered %s has the msgId returned by its send", m.Body)
	}
	return nil
}

func (r *runner) sendAsync() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	const count = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	ids := map[string]bool{}
	for i := 0; i < count; i++ {
		wg.Add(1)
		err := p.SendAsync(context.Background(), func(_ context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err.Error())
				return
			}
			if res.Status != primitive.SendOK {
				failures = append(failures, fmt.Sprintf("status %v", res.Status))
			}
			ids[res.MsgID] = true
		}, primitive.NewMessage(r.topic, []byte(fmt.Sprintf("async-%d", i))))
		r.check(err == nil, "async send %d accepted: %v", i, err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stepTimeout):
		r.check(false, "all async callbacks ran")
	}
	mu.Lock()
	r.check(len(failures) == 0, "async sends succeeded: %v", failures)
	r.check(len(ids) == count, "async sends returned %d distinct msgIds, got %d", count, len(ids))
	mu.Unlock()
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	r.awaitUnique(c, count, "async messages delivered")
	for _, m := range c.all() {
		r.check(ids[m.MsgId], "delivered msgId %s was returned by an async send", m.MsgId)
	}
	return nil
}

func (r *runner) sendOneway() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	const count = 8
	want := map[string]int{}
	for i := 0; i < count; i++ {
		body := fmt.Sprintf("oneway-%d", i)
		want[body] = 1
		r.check(p.SendOneWay(context.Background(), primitive.NewMessage(r.topic, []byte(body))) == nil, "oneway send %d", i)
	}
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	r.awaitUnique(c, count, "oneway messages delivered")
	r.check(sameKeys(c.bodies(), want), "delivered bodies equal the oneway sends")
	return nil
}

func (r *runner) sendBatch() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	const count = 8
	batch := make([]*primitive.Message, 0, count)
	for i := 0; i < count; i++ {
		m := primitive.NewMessage(r.topic, []byte(fmt.Sprintf("batch-%d", i)))
		m.WithTag("TagBatch")
		m.WithKeys([]string{fmt.Sprintf("BatchKey%d", i)})
		batch = append(batch, m)
	}
	res, err := p.SendSync(context.Background(), batch...)
	r.check(err == nil, "batch send: %v", err)
	r.check(res.Status == primitive.SendOK, "batch status %v", res.Status)
	// The Go client builds a batch result's MsgID from the batch wrapper, which has no UNIQ_KEY, so
	// only the broker-assigned offset message id is checked here.
	r.check(res.OffsetMsgID != "", "batch result has the broker's offset msgId")
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	r.awaitUnique(c, count, "batch messages delivered")
	qs := map[int]bool{}
	offs := map[int64]bool{}
	seenIds := map[string]bool{}
	for _, m := range c.all() {
		qs[m.Queue.QueueId] = true
		offs[m.QueueOffset] = true
		i, err := strconv.Atoi(strings.TrimPrefix(string(m.Body), "batch-"))
		r.check(err == nil && i >= 0 && i < count, "batch body %s", m.Body)
		r.check(m.GetKeys() == fmt.Sprintf("BatchKey%d", i), "batch message %d keeps its key, got %q", i, m.GetKeys())
		r.check(m.GetTags() == "TagBatch", "batch message %d keeps its tag", i)
		r.check(m.MsgId != "" && !seenIds[m.MsgId], "batch message %d has its own msgId", i)
		seenIds[m.MsgId] = true
	}
	r.check(len(qs) == 1, "a batch lands in one queue, got %v", qs)
	r.check(len(offs) == count && offs[0] && offs[count-1], "batch messages have consecutive offsets 0..%d, got %v", count-1, offs)
	return nil
}

func (r *runner) properties() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	m := primitive.NewMessage(r.topic, []byte("props"))
	m.WithTag("TagProps")
	m.WithKeys([]string{"KeyOne", "KeyTwo"})
	m.WithProperty("cometPlain", "value1")
	m.WithProperty("cometSpaces", "a value with spaces")
	m.WithProperty("cometUnicode", "h\u00e9llo \u4e16\u754c")
	r.sendOk(p, m)
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	r.awaitUnique(c, 1, "message delivered")
	got := c.all()[0]
	r.check(got.GetTags() == "TagProps", "tag round-trips, got %q", got.GetTags())
	r.check(got.GetKeys() == "KeyOne KeyTwo", "keys round-trip, got %q", got.GetKeys())
	r.check(got.GetProperty("cometPlain") == "value1", "plain property, got %q", got.GetProperty("cometPlain"))
	r.check(got.GetProperty("cometSpaces") == "a value with spaces", "property with spaces, got %q", got.GetProperty("cometSpaces"))
	r.check(got.GetProperty("cometUnicode") == "h\u00e9llo \u4e16\u754c", "non-ASCII property, got %q", got.GetProperty("cometUnicode"))
	r.check(got.BornTimestamp > 0 && got.StoreTimestamp >= got.BornTimestamp, "born/store timestamps set and ordered")
	r.check(got.BornHost != "" && got.StoreHost != "", "born and store hosts set")
	return nil
}

func (r *runner) compressedBody() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	var sb strings.Builder
	for i := 0; sb.Len() < bigBodyLen; i++ {
		fmt.Fprintf(&sb, "comet compressible line %d\n", i)
	}
	body := sb.String()[:bigBodyLen]
	r.sendOk(p, primitive.NewMessage(r.topic, []byte(body)))
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	r.awaitUnique(c, 1, "message delivered")
	got := c.all()[0]
	r.check(string(got.Body) == body, "decompressed body equals the %d-byte original", bigBodyLen)
	// Consumers clear COMPRESSED_FLAG once they inflate the body, so the evidence that the client
	// compressed it and the broker kept it compressed is the stored record's size.
	r.check(got.StoreSize < bigBodyLen, "stored record (%d bytes, sysFlag %d) is smaller than the body", got.StoreSize, got.SysFlag)
	return nil
}

// ------------------------------------------------------------------ scenarios: push consumers

func (r *runner) clustering() error {
	r.createTopic()
	a, b := &collector{}, &collector{}
	ta, tb := &tracker{}, &tracker{}
	if err := r.pushConsumer(a, "*", consumer.WithStrategy(ta.allocate)); err != nil {
		return err
	}
	if err := r.pushConsumer(b, "*", consumer.WithStrategy(tb.allocate)); err != nil {
		return err
	}
	r.awaitBalanced(2, ta, tb)
	p, err := r.producer()
	if err != nil {
		return err
	}
	const count = 40
	for i := 0; i < count; i++ {
		r.sendOk(p, primitive.NewMessage(r.topic, []byte(fmt.Sprintf("cluster-%d", i))))
	}
	r.await(func() bool { return len(union(a.bodies(), b.bodies())) >= count }, "both consumers together received %d", count)
	total := len(a.all()) + len(b.all())
	r.check(total == count, "every message delivered exactly once, deliveries %d", total)
	r.check(len(a.all()) > 0 && len(b.all()) > 0, "both consumers got messages: %d/%d", len(a.all()), len(b.all()))
	qa, _ := ta.state()
	qb, _ := tb.state()
	for _, m := range a.all() {
		r.check(qa[m.Queue.QueueId], "consumer A only sees its own queues")
	}
	for _, m := range b.all() {
		r.check(qb[m.Queue.QueueId], "consumer B only sees its own queues")
	}
	return nil
}

func (r *runner) broadcasting() error {
	r.createTopic()
	a, b := &collector{}, &collector{}
	if err := r.pushConsumer(a, "*", consumer.WithConsumerModel(consumer.BroadCasting)); err != nil {
		return err
	}
	if err := r.pushConsumer(b, "*", consumer.WithConsumerModel(consumer.BroadCasting)); err != nil {
		return err
	}
	p, err := r.producer()
	if err != nil {
		return err
	}
	want := r.sendNumbered(p, "broadcast-", 20)
	r.awaitUnique(a, len(want), "consumer A received every message")
	r.awaitUnique(b, len(want), "consumer B received every message")
	r.check(sameKeys(a.bodies(), want), "consumer A got exactly the sent bodies")
	r.check(sameKeys(b.bodies(), want), "consumer B got exactly the sent bodies")
	return nil
}

// keyHashSelector sends every message with the same ORDER key to the same queue.
type keyHashSelector struct{}

func (keyHashSelector) Select(m *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	key := m.GetProperty("ORDER")
	h := 0
	for _, ch := range key {
		h = h*31 + int(ch)
	}
	if h < 0 {
		h = -h
	}
	return mqs[h%len(mqs)]
}

func (r *runner) orderly() error {
	r.createTopic()
	var mu sync.Mutex
	var seen []*primitive.MessageExt
	err := r.pushConsumerWith("*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		seen = append(seen, msgs...)
		mu.Unlock()
		return consumer.ConsumeSuccess, nil
	}, consumer.WithConsumerOrder(true))
	if err != nil {
		return err
	}
	p, err := r.producer(producer.WithQueueSelector(keyHashSelector{}))
	if err != nil {
		return err
	}
	const keys, perKey = 8, 10
	queueOfKey := map[string]int{}
	for seq := 0; seq < perKey; seq++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("order-%d", k)
			m := primitive.NewMessage(r.topic, []byte(fmt.Sprintf("%s:%d", key, seq)))
			m.WithProperty("ORDER", key)
			res := r.sendOk(p, m)
			if q, ok := queueOfKey[key]; ok {
				r.check(q == res.MessageQueue.QueueId, "selector keeps %s on one queue", key)
			}
			queueOfKey[key] = res.MessageQueue.QueueId
		}
	}
	r.await(func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= keys*perKey },
		"orderly consumer received %d", keys*perKey)
	mu.Lock()
	defer mu.Unlock()
	nextSeq := map[string]int{}
	lastOffset := map[int]int64{}
	for _, m := range seen {
		parts := strings.SplitN(string(m.Body), ":", 2)
		r.check(len(parts) == 2, "orderly body %s", m.Body)
		seq, err := strconv.Atoi(parts[1])
		r.check(err == nil, "orderly body %s", m.Body)
		key := parts[0]
		r.check(seq == nextSeq[key], "%s delivered in order: expected seq %d, got %d", key, nextSeq[key], seq)
		nextSeq[key] = seq + 1
		r.check(queueOfKey[key] == m.Queue.QueueId, "%s delivered from its selected queue", key)
		if prev, ok := lastOffset[m.Queue.QueueId]; ok {
			r.check(m.QueueOffset == prev+1, "queue %d offsets consecutive in delivery order: %d then %d", m.Queue.QueueId, prev, m.QueueOffset)
		}
		lastOffset[m.Queue.QueueId] = m.QueueOffset
	}
	r.check(len(seen) == keys*perKey, "no duplicates, got %d", len(seen))
	return nil
}

func (r *runner) retryDlq() error {
	r.createTopic()
	var mu sync.Mutex
	attempts := map[string]map[int32]bool{}
	var unexpected []string
	err := r.pushConsumerWith("*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			k := m.GetKeys()
			if attempts[k] == nil {
				attempts[k] = map[int32]bool{}
			}
			if attempts[k][m.ReconsumeTimes] || m.ReconsumeTimes > maxReconsume {
				unexpected = append(unexpected, fmt.Sprintf("%s reconsumeTimes=%d", k, m.ReconsumeTimes))
			}
			attempts[k][m.ReconsumeTimes] = true
		}
		return consumer.ConsumeRetryLater, nil
	}, consumer.WithMaxReconsumeTimes(maxReconsume))
	if err != nil {
		return err
	}
	p, err := r.producer()
	if err != nil {
		return err
	}
	keys := []string{"dlq-key-0", "dlq-key-1"}
	for _, k := range keys {
		m := primitive.NewMessage(r.topic, []byte("dlq-body-"+k))
		m.WithTag("TagDlq")
		m.WithKeys([]string{k})
		r.sendOk(p, m)
	}
	r.await(func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if len(attempts[k]) != maxReconsume+1 {
				return false
			}
		}
		return true
	}, "each message delivered with reconsumeTimes 0..%d", maxReconsume)
	dlq := "%DLQ%" + r.group
	dead := r.pullAll(dlq, len(keys))
	deadKeys := map[string]int{}
	for _, m := range dead {
		deadKeys[m.GetKeys()] = 1
		r.check(m.Topic == dlq, "dead message topic is %s, got %s", dlq, m.Topic)
		r.check(string(m.Body) == "dlq-body-"+m.GetKeys(), "dead message keeps its body")
		r.check(m.GetProperty("RETRY_TOPIC") == r.topic, "dead message records its original topic in RETRY_TOPIC")
	}
	r.check(sameKeys(deadKeys, map[string]int{keys[0]: 1, keys[1]: 1}), "both messages are in %s, got %v", dlq, deadKeys)
	mu.Lock()
	defer mu.Unlock()
	r.check(len(unexpected) == 0, "no delivery repeated or beyond maxReconsumeTimes: %v", unexpected)
	return nil
}

func (r *runner) delayLevel() error {
	r.createTopic()
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	p, err := r.producer()
	if err != nil {
		return err
	}
	m := primitive.NewMessage(r.topic, []byte("delayed"))
	m.WithTag("TagDelay")
	m.WithDelayTimeLevel(delayLevel)
	r.sendOk(p, m)
	r.awaitUnique(c, 1, "delayed message delivered")
	got := c.all()[0]
	waited := got.StoreTimestamp - got.BornTimestamp
	r.check(waited >= delayLevelMinMs, "stored in the topic at least 5000 ms after birth, got %d ms", waited)
	r.check(got.Topic == r.topic, "delivered on the real topic, got %s", got.Topic)
	r.check(got.GetTags() == "TagDelay", "tag survives the schedule topic")
	return nil
}

func (r *runner) fromFirstOffset() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	before := r.sendNumbered(p, "first-before-", 8)
	c := &collector{}
	if err := r.pushConsumer(c, "*", consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)); err != nil {
		return err
	}
	r.awaitUnique(c, len(before), "messages sent before the group existed are delivered")
	all := union(before, r.sendNumbered(p, "first-after-", 4))
	r.awaitUnique(c, len(all), "messages sent afterwards are delivered")
	r.check(sameKeys(c.bodies(), all), "delivered exactly what was sent")
	return nil
}

// fromLastOffset: the Go client sends no setZeroIfNotFound, so a broker that still holds a
// queue's first message answers offset 0 to QUERY_CONSUMER_OFFSET and a new group starts there
// (Apache's rule); queues without messages start at GET_MAX_OFFSET.
func (r *runner) fromLastOffset() error {
	return r.newGroupStart("last", consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset))
}

// fromTimestamp: see fromLastOffset for why the consumer starts at 0.
func (r *runner) fromTimestamp() error {
	return r.newGroupStart("ts", consumer.WithConsumeFromWhere(consumer.ConsumeFromTimestamp))
}

func (r *runner) newGroupStart(prefix string, opts ...consumer.Option) error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	before := r.sendNumbered(p, prefix+"-before-", 8)
	// consumeTimestamp has a one-second resolution: the boundary is the next whole second.
	boundary := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(boundary))
	after := r.sendNumbered(p, prefix+"-after-", 4)
	c := &collector{}
	t := &tracker{}
	opts = append(opts, consumer.WithStrategy(t.allocate), consumer.WithConsumeTimestamp(boundary.Format("20060102150405")))
	if err := r.pushConsumer(c, "*", opts...); err != nil {
		return err
	}
	r.awaitBalanced(1, t)
	all := union(before, after)
	r.awaitUnique(c, len(all), "new group starts at offset 0 of queues whose first message is present")
	r.check(sameKeys(c.bodies(), all), "delivered exactly what was sent")
	return nil
}

func (r *runner) tagFilter() error {
	r.createTopic()
	p, err := r.producer(producer.WithQueueSelector(producer.NewManualQueueSelector()))
	if err != nil {
		return err
	}
	tags := []string{"TagA", "TagC", "TagB", "TagC", "TagA", "TagB", "TagC", "TagA"}
	want := map[string]int{}
	for i, tag := range tags {
		body := fmt.Sprintf("%s-%d", tag, i)
		if tag != "TagC" {
			want[body] = 1
		}
		m := primitive.NewMessage(r.topic, []byte(body))
		m.WithTag(tag)
		r.sendOk(p, toQueue(m, &primitive.MessageQueue{Topic: r.topic, BrokerName: r.brokerName(), QueueId: i % queues}))
	}
	// The last message of every queue is a wanted one: once all wanted ones are in, every TagC
	// message has been passed over by the broker's or the client's filter.
	for q := 0; q < queues; q++ {
		body := fmt.Sprintf("TagB-tail-%d", q)
		want[body] = 1
		m := primitive.NewMessage(r.topic, []byte(body))
		m.WithTag("TagB")
		r.sendOk(p, toQueue(m, &primitive.MessageQueue{Topic: r.topic, BrokerName: r.brokerName(), QueueId: q}))
	}
	c := &collector{}
	if err := r.pushConsumer(c, "TagA || TagB", consumer.WithConsumeGoroutineNums(1)); err != nil {
		return err
	}
	r.awaitUnique(c, len(want), "every TagA/TagB message delivered")
	r.check(sameKeys(c.bodies(), want), "exactly the TagA/TagB messages delivered, got %v", c.bodies())
	for _, m := range c.all() {
		r.check(m.GetTags() == "TagA" || m.GetTags() == "TagB", "delivered tag %s", m.GetTags())
	}
	return nil
}

// brokerName is the name of the single broker serving r.topic (from the route).
func (r *runner) brokerName() string {
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{r.namesrv})))
	r.check(err == nil, "admin client: %v", err)
	defer adm.Close()
	mqs, err := adm.FetchPublishMessageQueues(context.Background(), r.topic)
	r.check(err == nil && len(mqs) > 0, "route of %s: %v", r.topic, err)
	return mqs[0].BrokerName
}

// ------------------------------------------------------------------ scenarios: pull consumers

func (r *runner) pullConsumer(group, topic string, opts ...consumer.Option) (pullConsumer, error) {
	all := append([]consumer.Option{
		consumer.WithNameServer([]string{r.namesrv}),
		consumer.WithGroupName(group),
		consumer.WithInstance(r.instance()),
	}, opts...)
	c, err := consumer.NewPullConsumer(all...)
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{}); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	r.shutdowns = append(r.shutdowns, func() { _ = c.Shutdown() })
	return c, nil
}

type pullConsumer interface {
	PullFrom(ctx context.Context, queue *primitive.MessageQueue, offset int64, numbers int) (*primitive.PullResult, error)
	UpdateOffset(queue *primitive.MessageQueue, offset int64) error
	PersistOffset(ctx context.Context, topic string) error
	CurrentOffset(queue *primitive.MessageQueue) (int64, error)
	Shutdown() error
}

// pullAll pulls every queue of topic from offset 0 until `expected` messages are in.
func (r *runner) pullAll(topic string, expected int) []*primitive.MessageExt {
	var out []*primitive.MessageExt
	lastErr := errors.New("nothing pulled yet")
	deadline := time.Now().Add(stepTimeout)
	for time.Now().Before(deadline) {
		out = out[:0]
		pc, err := r.pullConsumer("MxPull_"+r.suffix, topic)
		if err == nil {
			var mqs []*primitive.MessageQueue
			adm, aerr := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{r.namesrv})))
			if aerr == nil {
				mqs, err = adm.FetchPublishMessageQueues(context.Background(), topic)
				_ = adm.Close()
			}
			for _, mq := range mqs {
				res, perr := pc.PullFrom(context.Background(), mq, 0, 32)
				if perr == nil && res.Status == primitive.PullFound {
					out = append(out, res.GetMessageExts()...)
				} else if perr != nil {
					err = perr
				}
			}
			_ = pc.Shutdown()
		}
		if len(out) >= expected {
			r.checks++
			return out
		}
		if err != nil {
			lastErr = err
		} else {
			lastErr = fmt.Errorf("found %d", len(out))
		}
		time.Sleep(4 * pollEvery)
	}
	r.check(false, "pull %d messages from %s: %v", expected, topic, lastErr)
	return nil
}

// pullSeek is the Go row of the lite-pull-with-seek scenario: rocketmq-client-go 2.1.2 has no
// lite pull consumer, so "seek" is its PullFrom at an explicit offset.
func (r *runner) pullSeek() error {
	r.createTopic()
	p, err := r.producer(producer.WithQueueSelector(producer.NewManualQueueSelector()))
	if err != nil {
		return err
	}
	const count = 10
	mq := &primitive.MessageQueue{Topic: r.topic, BrokerName: r.brokerName(), QueueId: 0}
	for i := 0; i < count; i++ {
		r.sendOk(p, toQueue(primitive.NewMessage(r.topic, []byte(fmt.Sprintf("seek-%d", i))), mq))
	}
	pc, err := r.pullConsumer(r.group, r.topic)
	if err != nil {
		return err
	}
	res, err := pc.PullFrom(context.Background(), mq, 5, count)
	r.check(err == nil, "pull from offset 5: %v", err)
	r.check(res.Status == primitive.PullFound, "pull from 5 finds messages, got %v", res.Status)
	got := res.GetMessageExts()
	r.check(len(got) == count-5, "pull from 5 yields %d, got %d", count-5, len(got))
	for i, m := range got {
		r.check(m.QueueOffset == int64(5+i), "message %d after seek(5) has offset %d, got %d", i, 5+i, m.QueueOffset)
		r.check(string(m.Body) == fmt.Sprintf("seek-%d", 5+i), "message at offset %d has its body", 5+i)
	}
	res, err = pc.PullFrom(context.Background(), mq, 2, 1)
	r.check(err == nil && res.Status == primitive.PullFound, "pull from offset 2: %v", err)
	again := res.GetMessageExts()
	r.check(len(again) == 1 && again[0].QueueOffset == 2 && string(again[0].Body) == "seek-2", "seek(2) rewinds to seek-2")
	return nil
}

func (r *runner) pullOffsetRestart() error {
	r.createTopic()
	p, err := r.producer(producer.WithQueueSelector(producer.NewManualQueueSelector()))
	if err != nil {
		return err
	}
	const count, committed = 10, 4
	mq := &primitive.MessageQueue{Topic: r.topic, BrokerName: r.brokerName(), QueueId: 0}
	for i := 0; i < count; i++ {
		r.sendOk(p, toQueue(primitive.NewMessage(r.topic, []byte(fmt.Sprintf("pull-%d", i))), mq))
	}
	t := &tracker{}
	first, err := r.pullConsumer(r.group, r.topic, consumer.WithStrategy(t.allocate))
	if err != nil {
		return err
	}
	// PersistOffset commits the queues the consumer owns: wait for the rebalance to give it all.
	r.awaitBalanced(1, t)
	res, err := first.PullFrom(context.Background(), mq, 0, committed)
	r.check(err == nil, "first pull: %v", err)
	r.check(res.Status == primitive.PullFound, "first pull finds messages, got %v", res.Status)
	r.check(len(res.GetMessageExts()) == committed, "pull of %d returns %d, got %d", committed, committed, len(res.GetMessageExts()))
	r.check(res.NextBeginOffset == committed, "nextBeginOffset %d, got %d", committed, res.NextBeginOffset)
	r.check(res.MaxOffset == count, "maxOffset %d, got %d", count, res.MaxOffset)
	r.check(first.UpdateOffset(mq, res.NextBeginOffset) == nil, "update offset")
	r.check(first.PersistOffset(context.Background(), r.topic) == nil, "persist offset")
	r.check(first.Shutdown() == nil, "first consumer shuts down")
	second, err := r.pullConsumer(r.group, r.topic)
	if err != nil {
		return err
	}
	stored, err := second.CurrentOffset(mq)
	r.check(err == nil && stored == committed, "restarted consumer reads committed offset %d, got %d (%v)", committed, stored, err)
	res, err = second.PullFrom(context.Background(), mq, stored, count)
	r.check(err == nil && res.Status == primitive.PullFound, "second pull finds messages: %v", err)
	msgs := res.GetMessageExts()
	r.check(len(msgs) == count-committed, "second pull returns the %d unconsumed, got %d", count-committed, len(msgs))
	for i, m := range msgs {
		r.check(string(m.Body) == fmt.Sprintf("pull-%d", committed+i), "second pull message %d is pull-%d", i, committed+i)
	}
	res, err = second.PullFrom(context.Background(), mq, count, count)
	r.check(err == nil && res.Status == primitive.PullNoNewMsg, "pull at the end answers NO_NEW_MSG, got %v (%v)", statusOf(res), err)
	return nil
}

func statusOf(res *primitive.PullResult) any {
	if res == nil {
		return "no result"
	}
	return res.Status
}

// ------------------------------------------------------------------ scenarios: transactions

// txnListener answers the local transaction by body; a check back gets the final outcome
// (rolled back for txn-rollback, committed for the others).
type txnListener struct {
	mu                   sync.Mutex
	checkedIDs, checkedB []string
}

var txnFirstAnswer = map[string]primitive.LocalTransactionState{
	"txn-commit":   primitive.CommitMessageState,
	"txn-rollback": primitive.RollbackMessageState,
	"txn-unknown":  primitive.UnknowState,
}

func (l *txnListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if state, ok := txnFirstAnswer[string(m.Body)]; ok {
		return state
	}
	return primitive.RollbackMessageState
}

func (l *txnListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkedIDs = append(l.checkedIDs, m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex))
	l.checkedB = append(l.checkedB, string(m.Body))
	// the local transactions' final outcome: the UNKNOWN one has committed by now
	if string(m.Body) == "txn-rollback" {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func (l *txnListener) checked() ([]string, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.checkedIDs...), append([]string(nil), l.checkedB...)
}

// transactions: one half message committed, one rolled back, one UNKNOWN and committed on the
// broker's check. Exactly the two committed ones are delivered, only the UNKNOWN one is checked,
// and the rolled-back one never reaches the topic's queues.
func (r *runner) transactions() error {
	r.createTopic()
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	l := &txnListener{}
	p, err := producer.NewTransactionProducer(l, r.producerOptions()...)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	r.shutdowns = append(r.shutdowns, func() { _ = p.Shutdown() })
	idOf := map[string]string{}
	for _, body := range []string{"txn-commit", "txn-rollback", "txn-unknown"} {
		m := primitive.NewMessage(r.topic, []byte(body))
		m.WithTag("TagTxn")
		res, err := p.SendMessageInTransaction(context.Background(), m)
		r.check(err == nil, "%s: send half message: %v", body, err)
		r.check(res.Status == primitive.SendOK, "%s: half message stored, got %v", body, res.Status)
		r.check(res.State == txnFirstAnswer[body], "%s: local transaction state %v, got %v", body, txnFirstAnswer[body], res.State)
		r.check(res.MsgID != "", "%s: send result has a msgId", body)
		idOf[body] = res.MsgID
	}
	r.awaitUnique(c, 2, "the committed and the checked-then-committed messages delivered")
	want := map[string]int{"txn-commit": 1, "txn-unknown": 1}
	r.check(sameKeys(c.bodies(), want), "exactly the committed messages delivered, got %v", c.bodies())
	for _, m := range c.all() {
		r.check(m.Topic == r.topic, "delivered on the real topic, got %s", m.Topic)
		r.check(idOf[string(m.Body)] == m.MsgId, "%s delivered with the msgId of its half message", m.Body)
	}
	ids, bodies := l.checked()
	asked := false
	for _, id := range ids {
		asked = asked || id == idOf["txn-unknown"]
	}
	r.check(asked, "the broker asked the producer about the UNKNOWN transaction, asked about %v", bodies)
	for _, b := range bodies {
		r.check(b == "txn-unknown", "only the UNKNOWN transaction was checked, asked about %v", bodies)
	}
	stored := r.pullAll(r.topic, 2)
	r.check(len(stored) == 2, "the topic's queues hold the 2 committed messages only, found %d", len(stored))
	return nil
}

// ------------------------------------------------------------------ scenarios: ACL

// aclSendConsume: signed sends and a signed consumer on a topic and group the account is granted.
func (r *runner) aclSendConsume() error {
	r.createTopic()
	p, err := r.producer()
	if err != nil {
		return err
	}
	want := r.sendNumbered(p, "acl-", 8)
	c := &collector{}
	if err := r.pushConsumer(c, "*"); err != nil {
		return err
	}
	r.awaitUnique(c, len(want), "signed consumer received the signed sends")
	r.check(sameKeys(c.bodies(), want), "delivered exactly what was sent")
	r.check(len(c.all()) == len(want), "every message delivered once, deliveries %d", len(c.all()))
	return nil
}

// aclDenied: a granted send first (the account works), then two refusals: a topic outside the
// account's topicPerms, and a producer signing with a wrong secret key.
func (r *runner) aclDenied() error {
	forbidden := "MxT_acl_forbidden_" + r.suffix
	r.createTopic()
	r.createNamedTopic(forbidden)
	p, err := r.producer()
	if err != nil {
		return err
	}
	r.sendOk(p, primitive.NewMessage(r.topic, []byte("granted")))
	_, err = p.SendSync(context.Background(), primitive.NewMessage(forbidden, []byte("forbidden")))
	r.expectDenied(err, forbidden, "send to "+forbidden+" (not in topicPerms)")
	wrong, err := r.producer(producer.WithCredentials(*aclCredentials(aclUserEnv, "-wrong")),
		producer.WithGroupName("MxP_acl_wrong_"+r.suffix))
	if err != nil {
		return err
	}
	_, err = wrong.SendSync(context.Background(), primitive.NewMessage(r.topic, []byte("wrong-secret")))
	r.expectDenied(err, "signature", "send signed with a wrong secret key")
	return nil
}

// expectDenied: err is the broker's NO_PERMISSION answer and its text mentions `mention`.
func (r *runner) expectDenied(err error, mention, what string) {
	r.check(err != nil, "%s was accepted", what)
	text := err.Error()
	r.check(strings.Contains(text, noPermissionText), "%s fails with NO_PERMISSION (16), got: %s", what, text)
	r.check(strings.Contains(strings.ToLower(text), strings.ToLower(mention)), "%s: the error names %s, got: %s", what, mention, text)
}
