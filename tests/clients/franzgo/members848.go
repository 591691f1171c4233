// franzgo members848: several franz-go group members on the consumer group protocol (KIP-848,
// kgo.ServerSideBalancer) in one process, one kgo.Client each, for the client matrix of
// tests/clients/test_consumer_protocol_matrix.py. The protocol of its Java twin,
// tests/clients/java/ConsumerMembers.java:
//
//	franzgo members848 BOOTSTRAP GROUP TOPICS ASSIGNOR NAME...
//
// TOPICS comma-separated; ASSIGNOR uniform (kgo's sticky balancer, which franz-go names
// "uniform" to the coordinator) or range. A JSON line whenever a member's assignment changes
// ({"event": "assigned", "member", "partitions": ["topic:p"]}); stdin commands "start NAME",
// "close NAME" (prints "closed"), "commit NAME OFFSET" (prints "committed" with "partitions"
// and "error"), "exit".
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var emitMu sync.Mutex

func emitLocked(v map[string]any) {
	emitMu.Lock()
	defer emitMu.Unlock()
	emit(v)
}

type member848 struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	mu     sync.Mutex
	owned  map[string]map[int32]bool
	done   chan struct{}
}

func (m *member848) partitions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{}
	for t, ps := range m.owned {
		for p := range ps {
			out = append(out, fmt.Sprintf("%s:%d", t, p))
		}
	}
	sort.Strings(out)
	return out
}

func (m *member848) change(add bool, assigned map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for t, ps := range assigned {
		if m.owned[t] == nil {
			m.owned[t] = map[int32]bool{}
		}
		for _, p := range ps {
			if add {
				m.owned[t][p] = true
			} else {
				delete(m.owned[t], p)
			}
		}
	}
}

func startMember848(bootstrap, group string, topics []string, assignor, name string) *member848 {
	m := &member848{name: name, owned: map[string]map[int32]bool{}, done: make(chan struct{})}
	bal := kgo.StickyBalancer()
	if assignor == "range" {
		bal = kgo.RangeBalancer()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap), kgo.ClientID(name), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...), kgo.Balancers(bal), kgo.ServerSideBalancer(),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.change(true, a)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.change(false, r)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.change(false, l)
		}),
	)
	if err != nil {
		fail(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { // keep fetching, as an application would, and report changes
		defer close(m.done)
		last, reported := "", false
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			cl.PollFetches(pctx)
			pcancel()
			now := m.partitions()
			if key := strings.Join(now, ","); key != last || !reported {
				emitLocked(map[string]any{"event": "assigned", "member": name,
					"partitions": now})
				last, reported = key, true
			}
		}
	}()
	return m
}

func (m *member848) close() {
	m.cancel()
	<-m.done
	m.cl.LeaveGroup()
	m.cl.Close()
	emitLocked(map[string]any{"event": "closed", "member": m.name})
}

func (m *member848) commit(offset int64) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	done := []string{}
	m.mu.Lock()
	for t, ps := range m.owned {
		for p := range ps {
			if offsets[t] == nil {
				offsets[t] = map[int32]kgo.EpochOffset{}
			}
			offsets[t][p] = kgo.EpochOffset{Epoch: -1, Offset: offset}
			done = append(done, fmt.Sprintf("%s:%d", t, p))
		}
	}
	m.mu.Unlock()
	sort.Strings(done)
	var cerr error
	if len(done) > 0 {
		fin := make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest,
			resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			if err == nil {
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
							cerr = e
						}
					}
				}
			}
			close(fin)
		})
		<-fin
		cancel()
	}
	emitLocked(map[string]any{"event": "committed", "member": m.name, "partitions": done,
		"error": errName(cerr)})
}

func members848(args []string) {
	bootstrap, group, assignor := args[0], args[1], args[3]
	topics := strings.Split(args[2], ",")
	members := map[string]*member848{}
	for _, name := range args[4:] {
		members[name] = startMember848(bootstrap, group, topics, assignor, name)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.Fields(in.Text())
		if len(w) == 0 {
			continue
		}
		if w[0] == "exit" {
			break
		}
		if len(w) < 2 {
			continue
		}
		switch w[0] {
		case "start":
			members[w[1]] = startMember848(bootstrap, group, topics, assignor, w[1])
		case "close":
			if m := members[w[1]]; m != nil {
				delete(members, w[1])
				m.close()
			}
		case "commit":
			if m := members[w[1]]; m != nil {
				off, _ := strconv.ParseInt(w[2], 10, 64)
				m.commit(off)
			}
		}
	}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func(m *member848) { defer wg.Done(); m.close() }(m)
	}
	wg.Wait()
}
