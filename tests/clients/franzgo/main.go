// franz-go (kgo, kadm) as a judge of tests/clients/: the same sessions against offsetlog and
// against Kafka. Modes:
//
//	franzgo member BOOTSTRAP GROUP TOPIC STRATEGY CLIENT_ID INSTANCE_ID|- SESSION_MS
//	    a long-lived group member: prints a JSON line whenever its generation, member id or
//	    assignment changes; stdin commands "commit P OFFSET", "committed", "close"
//	    TLS and SASL from the environment (tests/security/): FRANZGO_TLS_CA (a PEM file;
//	    FRANZGO_TLS_CERT and FRANZGO_TLS_KEY for a client certificate), FRANZGO_SASL_MECHANISM
//	    (SCRAM-SHA-256 or SCRAM-SHA-512), FRANZGO_SASL_USER, FRANZGO_SASL_PASSWORD
//	franzgo admin BOOTSTRAP GROUP TOPIC
//	    kadm's group calls step by step; prints one JSON object, step -> result
//	franzgo txn BOOTSTRAP GROUP TOPIC TRANSACTIONAL_ID
//	    transactional offset commits: franz-go sends offsets in a transaction only from a
//	    GroupTransactSession, for records it consumed, and offsetlog stores no records, so
//	    this mode sends the transactional requests through the client (kgo routes them to
//	    the coordinator; versions capped at Kafka 3.9's, the classic transaction protocol)
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

func errName(err error) any {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func balancer(name string) kgo.GroupBalancer {
	switch name {
	case "range":
		return kgo.RangeBalancer()
	case "roundrobin":
		return kgo.RoundRobinBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer()
	}
	panic(name)
}

// securityOpts: TLS and SCRAM from the environment (see the top of this file).
func securityOpts() []kgo.Opt {
	var opts []kgo.Opt
	if ca := os.Getenv("FRANZGO_TLS_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			fail(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if cert := os.Getenv("FRANZGO_TLS_CERT"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, os.Getenv("FRANZGO_TLS_KEY"))
			if err != nil {
				fail(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	auth := scram.Auth{User: os.Getenv("FRANZGO_SASL_USER"), Pass: os.Getenv("FRANZGO_SASL_PASSWORD")}
	switch os.Getenv("FRANZGO_SASL_MECHANISM") {
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
	}
	return opts
}

func member(args []string) {
	bootstrap, group, topic, strategy, clientID, instanceID := args[0], args[1], args[2],
		args[3], args[4], args[5]
	sessionMs, _ := strconv.Atoi(args[6])
	var mu sync.Mutex
	owned := map[int32]bool{}
	assigned := 0
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap), kgo.ClientID(clientID), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.Balancers(balancer(strategy)), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(time.Duration(sessionMs) * time.Millisecond),
		kgo.HeartbeatInterval(300 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				owned[p] = true
			}
			assigned++
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				delete(owned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[topic] {
				delete(owned, p)
			}
		}),
	}
	if instanceID != "-" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	opts = append(opts, securityOpts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail(err)
	}
	commands := make(chan string, 16)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			commands <- strings.TrimSpace(in.Text())
		}
		commands <- "close"
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // keep fetching, as an application would
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			cl.PollFetches(pctx)
			pcancel()
		}
	}()
	last := ""
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			memberID, gen := cl.GroupMetadata()
			mu.Lock()
			parts := []int{}
			for p := range owned {
				parts = append(parts, int(p))
			}
			n := assigned
			mu.Unlock()
			sort.Ints(parts)
			key := fmt.Sprint(gen, memberID, parts, n)
			if n > 0 && key != last {
				last = key
				emit(map[string]any{"event": "assigned", "generation": gen,
					"memberId": memberID, "partitions": parts, "rebalances": n})
			}
		case cmd := <-commands:
			w := strings.Fields(cmd)
			if len(w) == 0 {
				continue
			}
			switch w[0] {
			case "close":
				cancel()
				cl.LeaveGroup()
				cl.Close()
				emit(map[string]any{"event": "closed"})
				return
			case "commit":
				p, _ := strconv.Atoi(w[1])
				off, _ := strconv.ParseInt(w[2], 10, 64)
				var cerr error
				done := make(chan struct{})
				cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
				cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{
					topic: {int32(p): {Epoch: -1, Offset: off}}},
					func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest,
						resp *kmsg.OffsetCommitResponse, err error) {
						cerr = err
						if err == nil {
							for _, t := range resp.Topics {
								for _, pp := range t.Partitions {
									if e := kerr.ErrorForCode(pp.ErrorCode); e != nil {
										cerr = e
									}
								}
							}
						}
						close(done)
					})
				<-done
				ccancel()
				emit(map[string]any{"event": "committed", "error": errName(cerr)})
			case "committed":
				adm := kadm.NewClient(cl)
				got, err := adm.FetchOffsets(context.Background(), group)
				offsets := map[string]any{}
				mu.Lock()
				for p := range owned {
					offsets[strconv.Itoa(int(p))] = nil
				}
				mu.Unlock()
				if err == nil {
					got.Each(func(o kadm.OffsetResponse) {
						if _, mine := offsets[strconv.Itoa(int(o.Partition))]; mine &&
							o.Topic == topic {
							offsets[strconv.Itoa(int(o.Partition))] = o.At
						}
					})
				}
				emit(map[string]any{"event": "offsets", "offsets": offsets,
					"error": errName(err)})
			}
		}
	}
}

type steps map[string]any

func (s steps) step(name string, f func() (any, error)) {
	v, err := f()
	if err != nil {
		s[name] = map[string]any{"error": errName(err)}
	} else {
		s[name] = v
	}
}

// fetched: the group's committed offsets of topic, asked for by partition with
// require_stable, again while a partition is UNSTABLE_OFFSET_COMMIT or one of want has no
// offset yet (for up to 10 s): Kafka writes a transaction's markers after it answers EndTxn,
// and until then a fetch may show the offsets before the transaction without saying they
// are unstable. Partitions without an offset (-1) are left out.
func fetched(ctx context.Context, adm *kadm.Client, group, topic string, want ...int32) (any, error) {
	for i := 0; ; i++ {
		got, err := adm.FetchOffsetsForTopics(kadm.RequireStable(ctx), group, topic)
		if errors.Is(err, kerr.UnstableOffsetCommit) && i < 200 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		unstable := false
		got.Each(func(o kadm.OffsetResponse) {
			key := fmt.Sprintf("%s:%d", o.Topic, o.Partition)
			switch {
			case errors.Is(o.Err, kerr.UnstableOffsetCommit):
				unstable = true
			case o.Err != nil:
				out[key] = map[string]any{"error": errName(o.Err)}
			case o.At != -1:
				out[key] = []any{o.At, o.Metadata}
			}
		})
		for _, p := range want {
			if _, ok := out[fmt.Sprintf("%s:%d", topic, p)]; !ok {
				unstable = true
			}
		}
		if !unstable || i >= 200 {
			return out, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(ctx context.Context, adm *kadm.Client, group string) (any, error) {
	d, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	g := d[group]
	if g.Err != nil {
		return nil, g.Err
	}
	members := []any{}
	for _, m := range g.Members {
		parts := []int{}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				for _, p := range t.Partitions {
					parts = append(parts, int(p))
				}
			}
		}
		sort.Ints(parts)
		members = append(members, map[string]any{"clientId": m.ClientID, "partitions": parts})
	}
	return map[string]any{"state": g.State, "protocolType": g.ProtocolType,
		"protocol": g.Protocol, "members": members}, nil
}

func listed(ctx context.Context, adm *kadm.Client, group string) (any, error) {
	l, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	g, ok := l[group]
	if !ok {
		return "absent", nil
	}
	return map[string]any{"state": g.State, "protocolType": g.ProtocolType}, nil
}

func commitOffsets(ctx context.Context, adm *kadm.Client, group string, os kadm.Offsets) (any, error) {
	r, err := adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return nil, err
	}
	return "ok", r.Error()
}

func admin(args []string) {
	bootstrap, group, topic := args[0], args[1], args[2]
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("franzgo-admin"))
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	s := steps{}
	offs := func(parts map[int32]int64, meta string) kadm.Offsets {
		os := kadm.Offsets{}
		for p, at := range parts {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1, Metadata: meta})
		}
		return os
	}
	s.step("describe_unknown", func() (any, error) { return describe(ctx, adm, group) })
	s.step("alter_empty", func() (any, error) {
		return commitOffsets(ctx, adm, group, offs(map[int32]int64{0: 10, 1: 11}, "a"))
	})
	s.step("offsets_1", func() (any, error) { return fetched(ctx, adm, group, topic) })
	s.step("listed_offsets_only", func() (any, error) { return listed(ctx, adm, group) })
	s.step("describe_offsets_only", func() (any, error) { return describe(ctx, adm, group) })

	var mu sync.Mutex
	assigned := false
	mcl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("admin-member"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(300*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			mu.Lock()
			assigned = true
			mu.Unlock()
		}))
	if err != nil {
		fail(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	go func() {
		for pctx.Err() == nil {
			c, cc := context.WithTimeout(pctx, 200*time.Millisecond)
			mcl.PollFetches(c)
			cc()
		}
	}()
	for i := 0; i < 600; i++ {
		mu.Lock()
		ok := assigned
		mu.Unlock()
		if ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.step("describe_stable", func() (any, error) { return describe(ctx, adm, group) })
	s.step("listed_stable", func() (any, error) { return listed(ctx, adm, group) })
	s.step("delete_offsets_subscribed", func() (any, error) {
		r, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return nil, err
		}
		e, _ := r.Lookup(topic, 0)
		return map[string]any{"partition": errName(e)}, nil
	})
	s.step("delete_group_nonempty", func() (any, error) {
		r, err := adm.DeleteGroups(ctx, group)
		if err != nil {
			return nil, err
		}
		return "ok", r[group].Err
	})
	s.step("alter_with_member", func() (any, error) {
		return commitOffsets(ctx, adm, group, offs(map[int32]int64{0: 99}, ""))
	})
	s.step("offsets_2", func() (any, error) { return fetched(ctx, adm, group, topic) })
	pcancel()
	mcl.LeaveGroup()
	mcl.Close()
	s.step("describe_after_leave", func() (any, error) { return describe(ctx, adm, group) })
	s.step("delete_offsets_empty", func() (any, error) {
		r, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return nil, err
		}
		e, _ := r.Lookup(topic, 0)
		return map[string]any{"partition": errName(e)}, nil
	})
	s.step("offsets_3", func() (any, error) { return fetched(ctx, adm, group, topic) })
	s.step("delete_group", func() (any, error) {
		r, err := adm.DeleteGroups(ctx, group)
		if err != nil {
			return nil, err
		}
		return "ok", r[group].Err
	})
	s.step("describe_deleted", func() (any, error) { return describe(ctx, adm, group) })
	s.step("listed_deleted", func() (any, error) { return listed(ctx, adm, group) })
	s.step("offsets_deleted", func() (any, error) { return fetched(ctx, adm, group, topic) })
	s.step("delete_group_again", func() (any, error) {
		r, err := adm.DeleteGroups(ctx, group)
		if err != nil {
			return nil, err
		}
		return "ok", r[group].Err
	})
	emit(s)
}

// retried: Kafka answers CONCURRENT_TRANSACTIONS while it writes the markers of the last
// transaction, and a coordinator may be loading; a client retries both
func retried(code func() (int16, error)) (int16, error) {
	for i := 0; ; i++ {
		c, err := code()
		if err != nil || i >= 200 || (c != kerr.ConcurrentTransactions.Code &&
			c != kerr.CoordinatorLoadInProgress.Code && c != kerr.CoordinatorNotAvailable.Code) {
			return c, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func codeName(c int16) any {
	if c == 0 {
		return "ok"
	}
	return errName(kerr.ErrorForCode(c))
}

func txn(args []string) {
	bootstrap, group, topic, txid := args[0], args[1], args[2], args[3]
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("franzgo-txn"),
		kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	s := steps{}
	type producer struct {
		id    int64
		epoch int16
	}
	initID := func() (producer, int16, error) {
		var pr producer
		c, err := retried(func() (int16, error) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = kmsg.StringPtr(txid)
			req.TransactionTimeoutMillis = 60000
			req.ProducerID, req.ProducerEpoch = -1, -1
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, err
			}
			pr = producer{resp.ProducerID, resp.ProducerEpoch}
			return resp.ErrorCode, nil
		})
		return pr, c, err
	}
	addOffsets := func(pr producer) (int16, error) {
		return retried(func() (int16, error) {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group =
				txid, pr.id, pr.epoch, group
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		})
	}
	commitOffsets := func(pr producer, parts map[int32]int64, generation int32,
		memberID string) (any, error) {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txid, group,
			pr.id, pr.epoch
		req.Generation, req.MemberID = generation, memberID
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = topic
		keys := []int{}
		for p := range parts {
			keys = append(keys, int(p))
		}
		sort.Ints(keys)
		for _, p := range keys {
			tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			tp.Partition, tp.Offset, tp.LeaderEpoch = int32(p), parts[int32(p)], -1
			t.Partitions = append(t.Partitions, tp)
		}
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[strconv.Itoa(int(rp.Partition))] = codeName(rp.ErrorCode)
			}
		}
		return out, nil
	}
	end := func(pr producer, commit bool) (int16, error) {
		return retried(func() (int16, error) {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit =
				txid, pr.id, pr.epoch, commit
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		})
	}
	// one transaction: AddOffsetsToTxn, TxnOffsetCommit, EndTxn; each step's answer
	transaction := func(pr producer, parts map[int32]int64, commit bool, gen int32,
		memberID string) any {
		out := map[string]any{}
		c, err := addOffsets(pr)
		if err != nil {
			return map[string]any{"error": errName(err)}
		}
		out["add"] = codeName(c)
		r, err := commitOffsets(pr, parts, gen, memberID)
		if err != nil {
			return map[string]any{"error": errName(err)}
		}
		out["commit"] = r
		c, err = end(pr, commit)
		if err != nil {
			return map[string]any{"error": errName(err)}
		}
		out["end"] = codeName(c)
		return out
	}
	first, c, err := initID()
	if err != nil || c != 0 {
		fail(fmt.Errorf("InitProducerId: %v %v", codeName(c), err))
	}
	s["committed"] = transaction(first, map[int32]int64{0: 55}, true, -1, "")
	s.step("committed_offsets", func() (any, error) { return fetched(ctx, adm, group, topic, 0) })
	s["aborted"] = transaction(first, map[int32]int64{0: 66, 1: 5}, false, -1, "")
	s.step("aborted_offsets", func() (any, error) { return fetched(ctx, adm, group, topic) })
	// an open transaction, then a newer producer of the same transactional id
	c, _ = addOffsets(first)
	s["open_add"] = codeName(c)
	r, _ := commitOffsets(first, map[int32]int64{1: 7}, -1, "")
	s["open_commit"] = r
	second, c, err := initID()
	s["second_init"] = map[string]any{"error": codeName(c), "epoch_bumped": second.epoch > first.epoch,
		"same_id": second.id == first.id}
	if err != nil {
		fail(err)
	}
	c, _ = end(first, true)
	s["fenced_end"] = codeName(c)
	c, _ = addOffsets(first)
	s["fenced_add"] = codeName(c)
	s.step("after_fencing", func() (any, error) { return fetched(ctx, adm, group, topic) })
	s["newer"] = transaction(second, map[int32]int64{2: 9}, true, -1, "")
	s.step("newer_offsets", func() (any, error) { return fetched(ctx, adm, group, topic, 2) })
	// nothing open: an EndTxn of either outcome
	c, _ = end(second, false)
	s["abort_nothing_open"] = codeName(c)
	emit(s)
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: franzgo member|admin|txn|members848 ..."))
	}
	switch os.Args[1] {
	case "member":
		member(os.Args[2:])
	case "admin":
		admin(os.Args[2:])
	case "txn":
		txn(os.Args[2:])
	case "members848":
		members848(os.Args[2:])
	default:
		fail(fmt.Errorf("unknown mode %s", os.Args[1]))
	}
}
