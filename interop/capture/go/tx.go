// The -tx mode: drives the Go client's transaction producer so that the recording proxy captures
// its half sends (SEND_MESSAGE 10 with TRAN_MSG=true and PGROUP), the END_TRANSACTION (37) it sends
// after each local transaction (commit, rollback, unknown), the broker's CHECK_TRANSACTION_STATE (39)
// for the unknown one and the client's answer (END_TRANSACTION with fromTransactionCheck=true,
// commit). The broker must check quickly (transactionCheckInterval/transactionTimeOut of seconds).
// A push consumer then waits until both committed messages are delivered, which proves the broker
// acted on the END_TRANSACTION frames.
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// outcomeProperty is the user property telling the local transaction which outcome to report.
const outcomeProperty = "cometTx"

var txOutcomes = []string{"commit", "rollback", "unknown"}

// txListener reports the outcome named by the message and answers every check with commit.
type txListener struct {
	checked   chan struct{}
	checkOnce sync.Once
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch m.GetProperty(outcomeProperty) {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	default:
		return primitive.UnknowState
	}
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	fmt.Printf("check: topic=%s outcome=%s txId=%s queueOffset=%d commitLogOffset=%d\n",
		m.Topic, m.GetProperty(outcomeProperty), m.TransactionId, m.QueueOffset, m.CommitLogOffset)
	l.checkOnce.Do(func() { close(l.checked) })
	return primitive.CommitMessageState
}

func runTx(namesrv, topic, _ string) error {
	rlog.SetLogLevel("warn")
	listener := &txListener{checked: make(chan struct{})}
	p, err := producer.NewTransactionProducer(listener,
		producer.WithNameServer([]string{namesrv}),
		producer.WithGroupName(topic+"_TXPG"),
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

	for _, outcome := range txOutcomes {
		deadline := time.Now().Add(stepTimeout)
		for {
			m := primitive.NewMessage(topic, []byte("tx-"+outcome))
			m.WithTag("TagTx")
			m.WithKeys([]string{"TxKey-" + outcome})
			m.WithProperty(outcomeProperty, outcome)
			res, err := p.SendMessageInTransaction(context.Background(), m)
			if err == nil && res.Status == primitive.SendOK {
				fmt.Printf("%s: %s local=%d\n", outcome, res.String(), res.State)
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("half send %s: result %v, error %v", outcome, res, err)
			}
			fmt.Printf("half send %s failed, retrying: %v %v\n", outcome, res, err)
			time.Sleep(retryPause)
		}
	}

	select {
	case <-listener.checked:
	case <-time.After(stepTimeout):
		return fmt.Errorf("the broker never sent CHECK_TRANSACTION_STATE")
	}

	// Both committed messages must be delivered; the rolled-back one must not.
	var mu sync.Mutex
	seen := map[string]bool{}
	both := make(chan struct{})
	var bothOnce sync.Once
	c, err := consumer.NewPushConsumer(
		consumer.WithNameServer([]string{namesrv}),
		consumer.WithGroupName(topic+"_TXPUSH"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return err
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			fmt.Printf("  consumed queue=%d offset=%d body=%s sysFlag=%d props=%v\n", m.Queue.QueueId, m.QueueOffset, m.Body, m.SysFlag, m.GetProperties())
			seen[string(m.Body)] = true
		}
		if seen["tx-commit"] && seen["tx-unknown"] {
			bothOnce.Do(func() { close(both) })
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
	case <-both:
	case <-time.After(stepTimeout):
		_ = c.Shutdown()
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("committed messages seen: %v", seen)
	}
	mu.Lock()
	rolledBack := seen["tx-rollback"]
	mu.Unlock()
	if rolledBack {
		_ = c.Shutdown()
		return fmt.Errorf("the rolled-back message was delivered")
	}
	fmt.Println("committed messages visible")
	return c.Shutdown()
}
