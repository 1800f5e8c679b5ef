// Command capture drives the real rocketmq-client-go v2 client through the commands Comet must
// speak, so that a recording proxy in front of the Apache name server and broker captures the exact
// bytes the Go client writes: route lookups, heartbeats, SEND_MESSAGE (the Go client uses code 10
// with V1 header keys) with tags/keys/user property, a batch of 3 (code 320), a compressed 8 KiB
// body, and a push consumer that pulls, consumes and commits its offset on shutdown.
//
// Usage: capture [-tx] <namesrv host:port> <topic> <broker name>. Every send goes to queue 0. With
// -tx it drives the transaction producer instead (tx.go). Exits non-zero if a step fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	expectedRecords = 5
	bigBodyLen      = 8192
	stepTimeout     = 60 * time.Second
	retryPause      = 500 * time.Millisecond
)

func main() {
	tx := flag.Bool("tx", false, "capture the transaction commands (half sends, END_TRANSACTION, check)")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: capture [-tx] <namesrv> <topic> <brokerName>")
		os.Exit(2)
	}
	steps := run
	if *tx {
		steps = runTx
	}
	if err := steps(flag.Arg(0), flag.Arg(1), flag.Arg(2)); err != nil {
		fmt.Fprintln(os.Stderr, "capture failed:", err)
		os.Exit(1)
	}
	fmt.Println("capture client done")
}

func run(namesrv, topic, brokerName string) error {
	rlog.SetLogLevel("warn")
	queue0 := &primitive.MessageQueue{Topic: topic, BrokerName: brokerName, QueueId: 0}

	p, err := producer.NewDefaultProducer(
		producer.WithNameServer([]string{namesrv}),
		producer.WithGroupName(topic+"_PG"),
		producer.WithQueueSelector(producer.NewManualQueueSelector()),
		producer.WithSendMsgTimeout(10*time.Second),
		producer.WithRetry(2),
	)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown()

	single := primitive.NewMessage(topic, []byte("hello comet golden"))
	single.WithTag("TagA")
	single.WithKeys([]string{"KeyA", "KeyB"})
	single.WithProperty("cometProp", "golden")
	single.Queue = queue0
	if err := send(p, "single", single); err != nil {
		return err
	}

	batch := make([]*primitive.Message, 0, 3)
	for i := 0; i < 3; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("batch-%d", i)))
		m.WithTag("TagB")
		m.WithKeys([]string{fmt.Sprintf("BatchKey%d", i)})
		m.Queue = queue0
		batch = append(batch, m)
	}
	if err := send(p, "batch", batch...); err != nil {
		return err
	}

	body := strings.Repeat("comet-golden-compressible-body-", bigBodyLen/31+1)[:bigBodyLen]
	big := primitive.NewMessage(topic, []byte(body))
	big.WithTag("TagC")
	big.WithKeys([]string{"BigKey"})
	big.Queue = queue0
	if err := send(p, "compressed", big); err != nil {
		return err
	}

	var seen int32
	done := make(chan struct{})
	c, err := consumer.NewPushConsumer(
		consumer.WithNameServer([]string{namesrv}),
		consumer.WithGroupName(topic+"_PUSH"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return err
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			fmt.Printf("  consumed queue=%d offset=%d tags=%s keys=%s bodyLen=%d\n", m.Queue.QueueId, m.QueueOffset, m.GetTags(), m.GetKeys(), len(m.Body))
			if atomic.AddInt32(&seen, 1) == expectedRecords {
				close(done)
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(stepTimeout):
		_ = c.Shutdown()
		return fmt.Errorf("push consumer saw only %d messages", atomic.LoadInt32(&seen))
	}
	fmt.Printf("push consumed %d\n", atomic.LoadInt32(&seen))
	// Shutdown persists the consumed offsets (UPDATE_CONSUMER_OFFSET) and unregisters the client.
	return c.Shutdown()
}

// send retries while the auto-created topic propagates; one call sends a single message or a batch.
func send(p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, what string, msgs ...*primitive.Message) error {
	deadline := time.Now().Add(stepTimeout)
	for {
		res, err := p.SendSync(context.Background(), msgs...)
		if err == nil && res.Status == primitive.SendOK {
			fmt.Printf("%s: %s\n", what, res.String())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s send: result %v, error %v", what, res, err)
		}
		fmt.Printf("%s send failed, retrying: %v %v\n", what, res, err)
		time.Sleep(retryPause)
	}
}
