// Package remote decides an MCP gateway's calls on a writ server over
// HTTP (writ gateway --server): the gateway's Writ, implemented with the
// HTTP client, so the gateway itself never imports the engine or a store.
package remote

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/writhq/writ"
	"github.com/writhq/writ/gateway"
	"github.com/writhq/writ/httpapi"
)

// Writ decides the gateway's calls on a writ server (--server).
// A call from an HTTP session is decided with the caller's own API key,
// the bearer token it presented to the gateway, so writ serve
// authenticates and scopes it; other calls (stdio sessions) use the
// gateway's own key ($WRIT_API_KEY). One client per key, cached.
type Writ struct {
	base string
	own  *httpapi.Client

	mu      sync.Mutex
	clients map[string]*httpapi.Client
	// who caches each key's identity (GET /v1/whoami) for identityTTL:
	// the gateway authenticates every HTTP request of a session. writ
	// serve still authenticates each check, so a key revoked meanwhile is
	// refused there.
	who map[string]identity
}

type identity struct {
	p       *writ.Principal
	expires time.Time
}

// identityTTL is how long the gateway trusts a key's identity before it
// asks writ serve again.
const identityTTL = 30 * time.Second

// maxRemoteKeys bounds the keys cached; beyond it the caches start over.
const maxRemoteKeys = 4096

// New returns the Writ of the server at base; own is the client with the
// gateway's own key, used for calls with no caller token.
func New(base string, own *httpapi.Client) *Writ {
	return &Writ{base: strings.TrimRight(base, "/"), own: own, clients: map[string]*httpapi.Client{}, who: map[string]identity{}}
}

// clientFor returns the client that presents token ("" for the
// gateway's own key).
func (r *Writ) clientFor(token string) *httpapi.Client {
	if token == "" {
		return r.own
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.clients[token]
	if !ok {
		if len(r.clients) >= maxRemoteKeys {
			clear(r.clients)
		}
		c = httpapi.NewClient(r.base, httpapi.WithHeader("Authorization", "Bearer "+token))
		r.clients[token] = c
	}
	return c
}

func (r *Writ) client(ctx context.Context) *httpapi.Client {
	c, _ := gateway.CallerFrom(ctx)
	return r.clientFor(c.Token)
}

// Base is the server's address, without a trailing slash.
func (r *Writ) Base() string { return r.base }

// Own is the client with the gateway's own key.
func (r *Writ) Own() *httpapi.Client { return r.own }

// Authenticate returns the principal of token, as writ serve knows it
// (GET /v1/whoami), cached for identityTTL.
func (r *Writ) Authenticate(ctx context.Context, token string) (*writ.Principal, error) {
	now := time.Now()
	r.mu.Lock()
	id, ok := r.who[token]
	r.mu.Unlock()
	if ok && now.Before(id.expires) {
		return id.p, nil
	}
	who, err := r.clientFor(token).WhoAmI(ctx)
	if err != nil {
		return nil, err
	}
	if who.Auth != httpapi.AuthAPIKeys {
		return nil, fmt.Errorf("the writ server authenticates no one (development mode)")
	}
	p := &writ.Principal{TenantID: who.TenantID, KeyID: who.KeyID, Subject: who.Subject, Roles: who.Roles, ActorType: who.ActorType, ActsFor: who.ActsFor}
	r.mu.Lock()
	if len(r.who) >= maxRemoteKeys {
		clear(r.who)
	}
	r.who[token] = identity{p: p, expires: now.Add(identityTTL)}
	r.mu.Unlock()
	return p, nil
}

func (r *Writ) Check(ctx context.Context, req *writ.CheckRequest) (*writ.Receipt, error) {
	return r.client(ctx).Check(ctx, req)
}

func (r *Writ) ReportExecution(ctx context.Context, rep *writ.ExecutionReport) (*writ.ExecutionAck, error) {
	return r.client(ctx).ReportExecution(ctx, rep)
}

func (r *Writ) Resume(ctx context.Context, req *writ.ResumeRequest) (*writ.Receipt, error) {
	return r.client(ctx).Resume(ctx, req)
}

// CaptureEvidence stores the evidence the gateway captured from a
// tool's result, with the gateway's own key ($WRIT_API_KEY), whatever
// key the call was checked with: an agent's key may not submit observed
// evidence, and the gateway's needs the gateway role.
func (r *Writ) CaptureEvidence(ctx context.Context, req *writ.AddEvidenceRequest) (*writ.StoredEvidence, error) {
	return r.own.AddEvidence(ctx, req)
}

// DecideApproval records the answer of the user the gateway asked
// (stdio sessions only): with the gateway's own key.
func (r *Writ) DecideApproval(ctx context.Context, req *writ.DecideApprovalRequest) (*writ.ApprovalRequest, error) {
	return r.own.DecideApproval(ctx, req)
}
