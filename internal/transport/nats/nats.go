// Package nats serves the Protobase API as NATS request-reply: schema get
// and apply, one write batch per request, Query pages and point lookups, as a NATS
// micro service (so `nats micro ls|info|stats` list it) whose endpoints
// share a queue group, letting several servers split the load of a subject.
// It is a thin adapter onto internal/engine: every rule and error code comes
// from the engine, and errors carry the same google.rpc.Status details as
// gRPC.
//
// # Subjects
//
// Under a prefix (default "protobase"):
//
//	PREFIX.schema.get  GetSchemaRequest  -> GetSchemaResponse
//	PREFIX.schema.apply ApplySchemaRequest -> ApplySchemaResponse (schema role)
//	PREFIX.insert      WriteRequest      -> WriteResponse   (one batch)
//	PREFIX.update      WriteRequest      -> WriteResponse
//	PREFIX.upsert      WriteRequest      -> WriteResponse
//	PREFIX.remove      WriteRequest      -> WriteResponse
//	PREFIX.query       QueryRequest      -> QueryResponse   (one page)
//	PREFIX.get         google.protobuf.Any (a key record) -> google.protobuf.Any
//	PREFIX.records.get GetRequest        -> GetResponse     (many keys, JSON or records)
//	PREFIX.keys.create CreateKeyRequest  -> CreateKeyResponse (admin)
//	PREFIX.keys.list   ListKeysRequest   -> ListKeysResponse  (admin)
//	PREFIX.keys.revoke RevokeKeyRequest  -> RevokeKeyResponse (admin)
//
// When the server requires API keys, each request carries the header
// "Authorization: Bearer KEY"; the key is checked per request, with the
// same roles, scopes and error codes as gRPC.
//
// # Replies
//
// The service answers only to reply subjects the caller may read
// (Options.Replies): a request whose reply subject is another caller's
// inbox, the API's own subjects or a subject NATS reserves is dropped
// unanswered and counted (Stats), since the service's connection may
// publish anywhere.
//
// # Encoding
//
// Payloads are the protobuf binary encoding of the protobase.v1 messages,
// unless the request has the header "Content-Type: application/json": then
// the request is protobuf JSON, records included ({"@type": ..., fields}),
// converted through the runtime schema, and the reply is JSON with the same
// header. An empty payload is the empty message.
//
// An error reply has the micro error headers, Nats-Service-Error-Code (the
// HTTP status equivalent of the gRPC code, as the REST gateway answers) and
// Nats-Service-Error (the message), and a body holding the google.rpc.Status
// in the request's encoding, with the same details as gRPC
// (protobase.v1.WriteError for writes).
//
// # Point lookups
//
// PREFIX.get takes a record of the wanted type with (at least) its
// primary-key fields set and answers the stored record, or NOT_FOUND. It is
// one storage read through engine.Get: no query planning, no snapshot, no
// decode. A QueryRequest with EQ on the primary key reaches the same single
// read through the planner, paying for the query's compilation.
//
// # Concurrency
//
// Each endpoint is one subscription, delivering its requests one at a time.
// A read (schema, query, get, keys list) is handed to a worker of its
// endpoint, up to Options.Workers at once, so a point lookup does not wait
// behind the scans before it on the same subject; when all are busy the
// delivery waits, and requests queue in the subscription up to its pending
// limits (PendingMsgs, PendingBytes; beyond them NATS drops them, as for
// any slow consumer). Memory is so bounded per endpoint: Workers requests
// and replies in flight, plus the pending bytes. A write batch is applied
// on the delivery goroutine, so batches on a subject apply in arrival
// order, and it then waits for its fsync on a goroutine of its own, so
// concurrent batches share one fsync (group commit) instead of queueing
// behind each other's; key changes are applied in order too.
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/apierror"
	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/auth"
	"github.com/protobase/protobase/internal/engine"
	"github.com/protobase/protobase/internal/lograte"
	"github.com/protobase/protobase/internal/transport/schemajson"
)

// Defaults of Options.
const (
	DefaultPrefix = "protobase"
	DefaultQueue  = "protobase"
	// ServiceName is the micro service name `nats micro` lists.
	ServiceName = "protobase"
	// DefaultWorkers bounds the requests of one read endpoint served at
	// once; DefaultPendingMsgs and DefaultPendingBytes bound those
	// waiting in each endpoint's subscription.
	DefaultWorkers      = 16
	DefaultPendingMsgs  = 4096
	DefaultPendingBytes = 64 << 20
)

// The endpoints' subjects, relative to the prefix (see Subject).
const (
	SubjectSchemaGet = "schema.get"
	SubjectInsert    = "insert"
	SubjectUpdate    = "update"
	SubjectUpsert    = "upsert"
	SubjectRemove    = "remove"
	SubjectQuery     = "query"
	SubjectGet       = "get"
	// SubjectGetRecords serves the Get RPC: many keys of one type, as
	// JSON values or key records, on one snapshot.
	SubjectGetRecords = "records.get"
	// SubjectWrite takes one WriteStreamRequest: a batch with its own
	// operation (or one per record), conditions and patch.
	SubjectWrite = "write"
)

// Subject returns the full subject of an endpoint under prefix.
func Subject(prefix, endpoint string) string { return prefix + "." + endpoint }

// HeaderContentType selects JSON payloads when it is ContentTypeJSON;
// HeaderAuthorization carries "Bearer KEY" when the server requires keys.
const (
	HeaderContentType   = "Content-Type"
	ContentTypeJSON     = "application/json"
	HeaderAuthorization = "Authorization"
)

// Options configure a Service.
type Options struct {
	// Conn is the connection to serve on; the caller owns it.
	Conn *nats.Conn
	// Engine answers the requests.
	Engine *engine.Engine
	// Resolver converts JSON payloads through the runtime schema.
	Resolver *schemajson.Resolver
	// Prefix of every subject (default DefaultPrefix).
	Prefix string
	// Queue is the queue group of every endpoint (default DefaultQueue).
	Queue string
	// MaxMessageBytes refuses larger requests with RESOURCE_EXHAUSTED; the
	// connection's max_payload bounds them too, and bounds replies.
	MaxMessageBytes int
	// Workers bounds the requests of one read endpoint served at once
	// (default DefaultWorkers). PendingMsgs and PendingBytes bound the
	// requests waiting in each endpoint's subscription (defaults
	// DefaultPendingMsgs, DefaultPendingBytes); NATS drops those beyond.
	Workers                   int
	PendingMsgs, PendingBytes int
	// Version is the micro service version, semver (default "0.0.0").
	Version string
	// Replies is the rule for the reply subjects the service answers to
	// (default RepliesAnyInbox, the only one possible on a NATS server
	// Protobase does not configure); see Replies.
	Replies Replies
	// Stats, when set, counts the requests dropped and the endpoints'
	// pending overflows (share it with ConnOptions); nil counts into a
	// Stats of the service's own.
	Stats *Stats
	// Logger receives failures to reply, dropped requests and pending
	// overflows (each kind at most once per 10 s); nil discards them.
	Logger *slog.Logger
	// Keys serves the key-management subjects. With Auth, every request
	// must carry the header "Authorization: Bearer KEY" of a key whose
	// role and scope allow it (UNAUTHENTICATED, 401, or
	// PERMISSION_DENIED, 403, otherwise).
	Keys *auth.Keyring
	Auth bool
	// KeyBytesPerSecond bounds, with Auth, the request bytes one key
	// brings to the service per second, over a burst of a second's worth
	// or twice the largest request if more (0: DefaultKeyBytesPerSecond;
	// negative: no bound). A request
	// past it is RESOURCE_EXHAUSTED, refused before it is decoded, and
	// OnFlood is called with the key's name, at most once a second per
	// key, so that the NATS server can close the key's connections.
	KeyBytesPerSecond int64
	OnFlood           func(keyName string)
}

// Service is a running NATS service. Stop it before closing the engine.
type Service struct {
	opts Options
	e    *engine.Engine
	svc  micro.Service
	log  *slog.Logger
	json protojson.UnmarshalOptions
	out  protojson.MarshalOptions

	ctx    context.Context // cancelled by Stop after in-flight work is done
	cancel context.CancelFunc

	// beforeRead, when set (by tests only), runs in the worker before a
	// read's handler: a synchronisation point.
	beforeRead func(micro.Request)

	stats       *Stats
	rates       *keyRates       // nil: no bound on keys' bytes
	dropLog     lograte.Limiter // requests dropped for their reply subject
	overflowLog lograte.Limiter // endpoints' pending limits reached
	replyLog    lograte.Limiter // replies the connection did not take
	floodLog    lograte.Limiter // keys over their byte rate

	// Unsubscribing drains asynchronously, so handlers may still be called
	// after micro's Stop returns. mu guards stopping; active counts the
	// handlers running and the write batches waiting for durability, and
	// is only incremented from zero under mu with stopping false, so Stop
	// can wait for it.
	mu       sync.Mutex
	stopping bool
	active   sync.WaitGroup
}

// Start registers the micro service and its endpoints on opts.Conn.
func Start(opts Options) (*Service, error) {
	if opts.Conn == nil || opts.Engine == nil || opts.Resolver == nil {
		return nil, errors.New("nats: Conn, Engine and Resolver are required")
	}
	opts = opts.withDefaults()
	if err := ValidPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		opts:  opts,
		e:     opts.Engine,
		log:   log,
		json:  protojson.UnmarshalOptions{Resolver: opts.Resolver},
		out:   protojson.MarshalOptions{Resolver: opts.Resolver},
		stats: opts.Stats,
	}
	if opts.Auth {
		s.rates = newKeyRates(opts.KeyBytesPerSecond, int(opts.Conn.MaxPayload()), s.flooding)
		if opts.Keys != nil {
			opts.Keys.OnRevoke(s.rates.forget)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	svc, err := micro.AddService(opts.Conn, micro.Config{
		Name:         ServiceName,
		Version:      opts.Version,
		Description:  "Protobase request-reply API (protobase.v1 messages; protobuf, or JSON with Content-Type: application/json)",
		QueueGroup:   opts.Queue,
		ErrorHandler: s.asyncError,
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("nats: add micro service: %w", err)
	}
	s.svc = svc
	if err := s.addEndpoints(svc.AddGroup(opts.Prefix)); err != nil {
		_ = svc.Stop()
		s.cancel()
		return nil, err
	}
	// The subscriptions travel to the NATS server asynchronously: without
	// this round trip a request sent right after the server reports ready
	// could find no responder.
	if err := opts.Conn.FlushTimeout(10 * time.Second); err != nil {
		_ = svc.Stop()
		s.cancel()
		return nil, fmt.Errorf("nats: registering the service's subscriptions: %w", err)
	}
	return s, nil
}

// withDefaults fills in the defaults of the options left zero.
func (opts Options) withDefaults() Options {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.KeyBytesPerSecond == 0 {
		opts.KeyBytesPerSecond = DefaultKeyBytesPerSecond
	}
	if opts.Queue == "" {
		opts.Queue = DefaultQueue
	}
	if opts.Version == "" {
		opts.Version = "0.0.0"
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.PendingMsgs <= 0 {
		opts.PendingMsgs = DefaultPendingMsgs
	}
	if opts.PendingBytes <= 0 {
		opts.PendingBytes = DefaultPendingBytes
	}
	if opts.Stats == nil {
		opts.Stats = new(Stats)
	}
	return opts
}

// asyncError hears the errors NATS reports on the service's
// subscriptions: a slow consumer is an endpoint whose pending limits were
// reached, so that NATS drops its requests until the workers catch up.
func (s *Service) asyncError(_ micro.Service, err *micro.NATSError) {
	msg := "nats: endpoint subscription error"
	if errors.Is(err, nats.ErrSlowConsumer) {
		s.stats.overflows.Add(1)
		msg = "nats: endpoint subscription error: its pending limits were reached, and NATS drops the requests past them"
	}
	if n, ok := s.overflowLog.Allow(); ok {
		s.log.Warn(msg, "subject", err.Subject, "err", err.Description, "events", n)
	}
}

// endpoint is one subject of the API: the role a request needs, whether
// its requests are served by workers (out of arrival order) and the
// handler.
type endpoint struct {
	name, subject string
	need          auth.Role
	pool          bool
	serve         func(*Service, *request)
}

const inOrder, pooled = false, true

// endpoints are the API's subjects; the embedded server's per-role publish
// permissions (PublishSubjects) are drawn from the same table.
var endpoints = []endpoint{
	{"schema-get", SubjectSchemaGet, auth.RoleRead, pooled, (*Service).schemaGet},
	{"schema-apply", SubjectSchemaApply, auth.RoleSchema, inOrder, (*Service).schemaApply},
	{"insert", SubjectInsert, auth.RoleWrite, inOrder, writeOp(engine.OpInsert)},
	{"update", SubjectUpdate, auth.RoleWrite, inOrder, writeOp(engine.OpUpdate)},
	{"upsert", SubjectUpsert, auth.RoleWrite, inOrder, writeOp(engine.OpUpsert)},
	{"remove", SubjectRemove, auth.RoleWrite, inOrder, writeOp(engine.OpRemove)},
	{"write", SubjectWrite, auth.RoleWrite, inOrder, (*Service).writeBatch},
	{"query", SubjectQuery, auth.RoleRead, pooled, (*Service).query},
	{"get", SubjectGet, auth.RoleRead, pooled, (*Service).get},
	{"records-get", SubjectGetRecords, auth.RoleRead, pooled, (*Service).getRecords},
	{"keys-create", SubjectKeysCreate, auth.RoleAdmin, inOrder, (*Service).keysCreate},
	{"keys-list", SubjectKeysList, auth.RoleAdmin, pooled, (*Service).keysList},
	{"keys-revoke", SubjectKeysRevoke, auth.RoleAdmin, inOrder, (*Service).keysRevoke},
}

// PublishSubjects are the full subjects under prefix of the endpoints a
// key of role may call (roles are ordered: each may call what the roles
// below it may); none for auth.RoleNone. The schema role has no endpoint
// of its own on NATS, so it publishes what the write role does.
func PublishSubjects(prefix string, role auth.Role) []string {
	var subjects []string
	for _, ep := range endpoints {
		if role >= ep.need {
			subjects = append(subjects, Subject(prefix, ep.subject))
		}
	}
	return subjects
}

// addEndpoints adds the service's endpoints to g, each behind its guard
// (the reply subject it may answer to, the role it needs, and for those
// served out of order a pool of workers).
func (s *Service) addEndpoints(g micro.Group) error {
	for _, ep := range endpoints {
		var workers chan struct{}
		if ep.pool {
			workers = make(chan struct{}, s.opts.Workers)
		}
		if err := g.AddEndpoint(ep.name, s.guard(ep.need, workers, ep.serve), micro.WithEndpointSubject(ep.subject),
			micro.WithEndpointPendingLimits(s.opts.PendingMsgs, s.opts.PendingBytes)); err != nil {
			return fmt.Errorf("nats: endpoint %s: %w", ep.subject, err)
		}
	}
	return nil
}

// ValidPrefix checks that prefix is a literal NATS subject (tokens of
// printable characters without wildcards, separated by single dots)
// outside the subjects NATS reserves: those starting with $ ($SYS, $JS,
// the system account's and JetStream's API) and _INBOX (replies). The
// service's endpoints there would answer the server's own traffic, and
// replies into them would pass for requests.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("nats: subject prefix is empty")
	}
	if strings.HasPrefix(prefix, "$") || strings.HasPrefix(prefix, "_INBOX") {
		return fmt.Errorf("nats: subject prefix %q is in the subjects NATS reserves (starting with $ or _INBOX)", prefix)
	}
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" {
			return fmt.Errorf("nats: subject prefix %q has an empty token", prefix)
		}
		if tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return fmt.Errorf("nats: subject prefix %q must not hold wildcards or whitespace", prefix)
		}
	}
	return nil
}

// Stop unsubscribes, lets running handlers finish and write batches become
// durable and reply, then returns; requests still being delivered get
// UNAVAILABLE, so a client may retry another server of the queue group. It
// does not close the connection.
func (s *Service) Stop() error {
	err := s.svc.Stop()
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.active.Wait()
	s.cancel()
	if err != nil {
		return fmt.Errorf("nats: stop service: %w", err)
	}
	return nil
}

// guard drops a request whose reply subject the caller may not have asked
// for (see Replies), then counts a handler as active, or refuses the
// request once Stop began; with Auth it authenticates the request and
// checks that the key has the role need. With workers (a semaphore, one
// slot a running request), the request is served on a goroutine of its
// own once a slot is free, and the delivery goroutine waits for that slot,
// not for the reply.
func (s *Service) guard(need auth.Role, workers chan struct{}, h func(*Service, *request)) micro.HandlerFunc {
	return func(req micro.Request) {
		if why := s.opts.Replies.check(req.Reply(), authorization(req.Headers()), s.opts.Prefix); why != dropNone {
			s.drop(req, why)
			return
		}
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			s.fail(s.begin(req), apierror.New(apierror.Unavailable, "the server is stopping"))
			return
		}
		s.active.Add(1)
		s.mu.Unlock()
		if workers == nil {
			defer s.active.Done()
			s.serve(need, req, h)
			return
		}
		workers <- struct{}{}
		go func() {
			defer func() { <-workers }()
			defer s.active.Done()
			if s.beforeRead != nil {
				s.beforeRead(req)
			}
			s.serve(need, req, h)
		}()
	}
}

// serve authenticates req (with Auth) and runs h.
func (s *Service) serve(need auth.Role, req micro.Request, h func(*Service, *request)) {
	r := s.begin(req)
	if s.opts.Auth {
		id, err := auth.VerifyHeader(s.ctx, s.opts.Keys, authorization(req.Headers()))
		if err == nil {
			_, err = auth.Require(auth.NewContext(s.ctx, id), true, need)
		}
		if err == nil {
			if err = s.rates.admit(id, len(req.Data())); err != nil {
				s.stats.rateRefused.Add(1)
			}
		}
		if err != nil {
			s.fail(r, err)
			return
		}
		r.id = id
	}
	h(s, r)
}

// flooding reports a key whose requests keep coming faster than its
// bound: logged (sampled), counted, and handed to OnFlood.
func (s *Service) flooding(name string) {
	s.stats.floods.Add(1)
	if n, ok := s.floodLog.Allow(); ok {
		s.log.Warn("nats: an API key sends requests faster than its bound; closing its connections", "key", name, "times", n)
	}
	if s.opts.OnFlood != nil {
		s.opts.OnFlood(name)
	}
}

// authorization returns the Authorization header. NATS headers are
// case-sensitive; the lower-case spelling of gRPC metadata is accepted too.
func authorization(h micro.Headers) string {
	if v := h.Get(HeaderAuthorization); v != "" {
		return v
	}
	return h.Get("authorization")
}

// request is one decoded request's context: its encoding, reply path and
// caller (nil with auth off).
type request struct {
	micro.Request
	json bool
	id   *auth.Identity
}

func (s *Service) begin(req micro.Request) *request {
	ct := req.Headers().Get(HeaderContentType)
	return &request{Request: req, json: strings.HasPrefix(ct, ContentTypeJSON)}
}

// decode reads the payload into m; an empty payload is the empty message.
func (s *Service) decode(r *request, m proto.Message) error {
	data := r.Data()
	if max := s.opts.MaxMessageBytes; max > 0 && len(data) > max {
		return apierror.Errorf(apierror.ResourceExhausted, "request of %d bytes is larger than the limit of %d bytes", len(data), max)
	}
	if len(data) == 0 {
		return nil
	}
	if r.json {
		h, err := s.opts.Engine.TranscodeHold(s.ctx, schemajson.DecodeCost(data), "the request")
		if err != nil {
			return err
		}
		defer h.Release()
		return schemajson.Unmarshal(s.json, data, m)
	}
	if err := proto.Unmarshal(data, m); err != nil {
		// Say which message was expected: the usual cause is a JSON
		// payload sent without the Content-Type header.
		return apierror.Errorf(apierror.InvalidArgument, "payload is not a protobuf %s (for JSON, set the header %s: %s): %w",
			m.ProtoReflect().Descriptor().FullName(), HeaderContentType, ContentTypeJSON, err)
	}
	return nil
}

// marshalJSON renders m as JSON, holding what that takes of the result
// budget while it does (schemajson.Resolver.EncodeCost).
func (s *Service) marshalJSON(m proto.Message) ([]byte, error) {
	h, err := s.opts.Engine.TranscodeHold(s.ctx, s.opts.Resolver.EncodeCost(m), "the reply")
	if err != nil {
		return nil, err
	}
	defer h.Release()
	return s.out.Marshal(m)
}

// reply sends m in the request's encoding. A reply the connection cannot
// carry (over max_payload) becomes a RESOURCE_EXHAUSTED error instead of
// silence.
func (s *Service) reply(r *request, m proto.Message) {
	var b []byte
	var err error
	if r.json {
		b, err = s.marshalJSON(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		if _, ok := errors.AsType[*apierror.Error](err); !ok {
			err = apierror.Errorf(apierror.Internal, "encode reply: %w", err)
		}
		s.fail(r, err)
		return
	}
	if max := s.opts.Conn.MaxPayload(); int64(len(b)) > max {
		s.fail(r, apierror.Errorf(apierror.ResourceExhausted,
			"reply of %d bytes exceeds the NATS max_payload of %d bytes; ask for fewer records (page_size)", len(b), max))
		return
	}
	var h nats.Header
	if r.json {
		h = nats.Header{HeaderContentType: {ContentTypeJSON}}
	}
	if err := s.send(r, h, b); err != nil {
		s.replyFailed(r, err)
	}
}

// send publishes a reply, headers h and body b, to r's reply subject on
// the service's connection. It does not go through micro.Request's
// Respond or Error: those record their outcome in the request, which the
// micro framework reads as soon as the handler returns, and a worker
// replies after that (a data race).
func (s *Service) send(r *request, h nats.Header, b []byte) error {
	if r.Reply() == "" {
		return micro.ErrRespond
	}
	return s.opts.Conn.PublishMsg(&nats.Msg{Subject: r.Reply(), Header: h, Data: b})
}

// replyBytes bounds the records of a reply (a Get, a Query page) so that
// its protobuf encoding fits the connection's max_payload; a JSON reply
// may still be over it, which reply refuses.
func (s *Service) replyBytes() int {
	return int(max(s.opts.Conn.MaxPayload()-4<<10, 1))
}

// fail sends err as a micro error: the HTTP-equivalent code and message in
// the headers, the google.rpc.Status with its details as the body.
func (s *Service) fail(r *request, err error) {
	st := apistatus.Status(err)
	var body []byte
	if r.json {
		body, err = s.out.Marshal(st.Proto())
	} else {
		body, err = proto.Marshal(st.Proto())
	}
	if err != nil {
		body = nil
	}
	msg := st.Message()
	if msg == "" {
		msg = st.Code().String()
	}
	// Header values cannot hold line breaks; the body has the full text.
	h := nats.Header{
		micro.ErrorHeader:     {strings.ReplaceAll(msg, "\n", " ")},
		micro.ErrorCodeHeader: {strconv.Itoa(apistatus.HTTPStatus(st.Code()))},
	}
	if r.json {
		h[HeaderContentType] = []string{ContentTypeJSON}
	}
	if rerr := s.send(r, h, body); rerr != nil {
		s.replyFailed(r, rerr)
	}
}

// replyFailed logs a reply the connection did not take (while it
// reconnects, past its reconnect buffer), at most once per lograte.Every.
func (s *Service) replyFailed(r *request, err error) {
	if n, ok := s.replyLog.Allow(); ok {
		s.log.Warn("nats: reply failed", "subject", r.Subject(), "err", err, "failures", n)
	}
}

func (s *Service) schemaGet(r *request) {
	if err := s.decode(r, new(pb.GetSchemaRequest)); err != nil {
		s.fail(r, err)
		return
	}
	resp, err := s.e.GetSchema(s.ctx)
	if err != nil {
		s.fail(r, err)
		return
	}
	s.reply(r, auth.FilterSchema(r.id, resp))
}

func (s *Service) query(r *request) {
	q := new(pb.QueryRequest)
	if err := s.decode(r, q); err != nil {
		s.fail(r, err)
		return
	}
	if err := r.id.CheckType(q.GetQuery().GetType()); err != nil {
		s.fail(r, err)
		return
	}
	resp, h, err := s.e.Query(s.ctx, q, s.replyBytes())
	if err != nil {
		s.fail(r, err)
		return
	}
	defer h.Release() // reply has sent it
	s.reply(r, resp)
}

func (s *Service) get(r *request) {
	key := new(anypb.Any)
	if err := s.decode(r, key); err != nil {
		s.fail(r, err)
		return
	}
	if err := r.id.CheckType(key.GetTypeUrl()); err != nil {
		s.fail(r, err)
		return
	}
	rec, err := s.e.Get(s.ctx, key)
	if err != nil {
		s.fail(r, err)
		return
	}
	if rec == nil {
		s.fail(r, apierror.Errorf(apierror.NotFound, "no %s record with that primary key", typeName(key.TypeUrl)))
		return
	}
	s.reply(r, rec)
}

func (s *Service) getRecords(r *request) {
	req := new(pb.GetRequest)
	if err := s.decode(r, req); err != nil {
		s.fail(r, err)
		return
	}
	if err := r.id.CheckType(req.GetType()); err != nil {
		s.fail(r, err)
		return
	}
	resp, h, err := s.e.GetRecords(s.ctx, req, s.replyBytes())
	if err != nil {
		s.fail(r, err)
		return
	}
	defer h.Release() // reply has sent it
	s.reply(r, resp)
}

// writeOp is the handler of the write endpoint of op: a WriteRequest is
// one batch of op.
func writeOp(op engine.Op) func(*Service, *request) {
	return func(s *Service, r *request) {
		req := new(pb.WriteRequest)
		err := s.decode(r, req)
		s.write(r, engine.Batch{Op: op, Records: req.Records, Conditions: req.Conditions}, err)
	}
}

// writeBatch is the handler of the write endpoint: a WriteStreamRequest
// is one batch with its own operation or one per record, its conditions
// and its patch (ack is implied: the reply comes once it is durable).
func (s *Service) writeBatch(r *request) {
	req := new(pb.WriteStreamRequest)
	err := s.decode(r, req)
	op, ok := engine.OpFromProto(req.Op)
	if err == nil && !ok && len(req.Ops) == 0 && len(req.Records) > 0 {
		err = apierror.Errorf(apierror.InvalidArgument, "op %v is not a write operation", req.Op)
	}
	s.write(r, engine.Batch{Op: op, Records: req.Records, Ops: req.Ops, Conditions: req.Conditions, Fields: req.Fields, Add: req.Add}, err)
}

// write applies batch b, which decoding refused with err when not nil, in
// arrival order, then waits for durability off the delivery goroutine
// (see the package comment).
func (s *Service) write(r *request, b engine.Batch, err error) {
	w := s.e.NewWriter()
	if err == nil {
		err = r.id.CheckWrite(b.Records, b.Conditions)
	}
	if err != nil {
		err = w.Abort(err)
	} else {
		err = w.Apply(s.ctx, b)
	}
	if err != nil {
		_ = w.Close()
		s.fail(r, err)
		return
	}
	s.active.Add(1) // nonzero already: this handler is active
	go func() {
		defer s.active.Done()
		defer func() { _ = w.Close() }() // synced below; Close only frees
		pos, err := w.Sync()
		if err != nil {
			s.fail(r, err)
			return
		}
		s.reply(r, &pb.WriteResponse{Batches: w.Batches(), Records: w.Records(), Position: pos})
	}()
}

func typeName(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		return url[i+1:]
	}
	return url
}
