package httpapi

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/writhq/writ"
)

// RateLimit limits each API key's requests: a token bucket per key,
// refilled at PerSecond tokens a second and holding at most Burst. A
// request beyond it is answered at once with 429 (code rate_limited) and
// Retry-After, and never reaches the service, so one key's flood leaves
// the other keys' requests alone. Without authentication the key is the
// client's IP address. The zero RateLimit (PerSecond 0) limits nothing.
type RateLimit struct {
	PerSecond float64
	// Burst is the bucket's size: the requests a key may send at once
	// after being idle. Zero or less means max(1, ceil(PerSecond)).
	Burst int
}

// maxLimiterKeys is how many keys' buckets are kept before idle ones are
// dropped: a bucket idle long enough to have refilled is the same as a
// new one, so dropping it changes nothing.
const maxLimiterKeys = 4096

// keyLimiter keeps one token bucket per key.
type keyLimiter struct {
	limit  rate.Limit
	burst  int
	refill time.Duration // the time an empty bucket takes to fill

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newKeyLimiter(rl RateLimit) *keyLimiter {
	if rl.PerSecond <= 0 {
		return nil
	}
	burst := rl.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(rl.PerSecond)))
	}
	return &keyLimiter{
		limit: rate.Limit(rl.PerSecond), burst: burst,
		refill:  time.Duration(float64(burst) / rl.PerSecond * float64(time.Second)),
		buckets: map[string]*bucket{},
	}
}

// allow takes a token of key's bucket at now, or says how long until one
// is there.
func (k *keyLimiter) allow(key string, now time.Time) (bool, time.Duration) {
	k.mu.Lock()
	b := k.buckets[key]
	if b == nil {
		if len(k.buckets) >= maxLimiterKeys {
			for id, old := range k.buckets {
				if now.Sub(old.seen) >= k.refill {
					delete(k.buckets, id)
				}
			}
		}
		b = &bucket{lim: rate.NewLimiter(k.limit, k.burst)}
		k.buckets[key] = b
	}
	b.seen = now
	k.mu.Unlock()
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// rateKey is what a request is limited by: its API key, or the client's
// IP address when the server does not authenticate.
func rateKey(r *http.Request) string {
	if p := writ.PrincipalFrom(r.Context()); p != nil && p.KeyID != "" {
		return "key:" + p.KeyID
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

// allowRate answers 429 and returns false when the request's key is over
// its rate limit.
func (s *Server) allowRate(w http.ResponseWriter, r *http.Request) bool {
	if s.rates == nil {
		return true
	}
	ok, wait := s.rates.allow(rateKey(r), s.cfg.Now())
	if ok {
		return true
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	s.writeError(w, r, writ.Errorf(writ.ERATELIMITED, "this key sent more than %s requests a second (burst %d); retry after %d s", strconv.FormatFloat(float64(s.rates.limit), 'f', -1, 64), s.rates.burst, secs))
	return false
}
