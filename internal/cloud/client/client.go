// Package client is the typed Go client of machina's simulated cloud. It retries
// throttled (429, honouring Retry-After) and failed (5xx, connection errors) calls with
// backoff, stops when its context ends, and returns *api.Error values that the Is*
// functions classify.
//
// Every call is safe to retry: RunInstances and CreateNetwork are idempotent through
// their client token, CreateScalingGroup through its name, the rest by their nature.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// HTTPClient defaults to a client with a 60s timeout per attempt.
	HTTPClient *http.Client
	// MaxRetries is how many times a retryable failure is retried; default 8, negative
	// means never.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff between retries of 5xx and
	// connection errors; default 100ms and 5s. Throttled calls wait for Retry-After.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// UserAgent is sent with every request.
	UserAgent string
}

// Client calls one simulated cloud.
type Client struct {
	base *url.URL
	opts Options
	hc   *http.Client
}

// New returns a client of the cloud at baseURL (e.g. http://127.0.0.1:8787, as given by
// server.URL or printed by machina cloud).
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cloud client: base URL %q must be http://host:port", baseURL)
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 8
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "machina-cloud-client"
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &Client{base: u, opts: opts, hc: hc}, nil
}

// URL is the cloud's base URL.
func (c *Client) URL() string { return c.base.String() }

// Call performs operation op with request req and decodes the response into resp. It is
// what the typed methods use; tests may use it for raw access.
func (c *Client) Call(ctx context.Context, op string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("cloud %s: encoding request: %w", op, err)
	}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		err := c.once(ctx, op, body, resp)
		observe(op, start, err)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cloud %s: %w (last error: %v)", op, ctx.Err(), err)
		}
		wait, retry := c.retryDelay(err, attempt)
		if !retry || (c.opts.MaxRetries > 0 && attempt >= c.opts.MaxRetries) || c.opts.MaxRetries < 0 {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would outlast the deadline; report the real failure now.
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("cloud %s: %w (last error: %v)", op, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// retryDelay says whether err is worth retrying and after how long.
func (c *Client) retryDelay(err error, attempt int) (time.Duration, bool) {
	var ae *api.Error
	if errors.As(err, &ae) {
		switch {
		case ae.StatusCode == http.StatusTooManyRequests:
			if ae.RetryAfter > 0 {
				return ae.RetryAfter, true
			}
			return c.backoff(attempt), true
		case IsCapacity(ae):
			return 0, false // retrying the same launch will not find capacity
		case ae.StatusCode >= 500:
			return c.backoff(attempt), true
		}
		return 0, false
	}
	var te *transportError
	if errors.As(err, &te) {
		return c.backoff(attempt), true
	}
	return 0, false
}

// backoff is exponential with jitter in [d/2, d].
func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.MinBackoff << min(attempt, 20)
	if d > c.opts.MaxBackoff || d <= 0 {
		d = c.opts.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// transportError is a failure to get any HTTP answer (connection refused, reset...).
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func (c *Client) once(ctx context.Context, op string, body []byte, resp any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+"/v1/"+op, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("cloud %s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.opts.UserAgent)
	res, err := c.hc.Do(req)
	if err != nil {
		return &transportError{fmt.Errorf("cloud %s: %w", op, err)}
	}
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return &transportError{fmt.Errorf("cloud %s: reading response: %w", op, err)}
	}
	if res.StatusCode/100 != 2 {
		ae := &api.Error{}
		if json.Unmarshal(data, ae) != nil || ae.Code == "" {
			ae = &api.Error{Code: "HTTP" + strconv.Itoa(res.StatusCode), Message: strings.TrimSpace(string(data))}
		}
		ae.StatusCode = res.StatusCode
		if s := res.Header.Get("Retry-After"); s != "" {
			if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
				ae.RetryAfter = time.Duration(secs) * time.Second
			}
		}
		return ae
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(data, resp); err != nil {
		return fmt.Errorf("cloud %s: decoding response: %w", op, err)
	}
	return nil
}
