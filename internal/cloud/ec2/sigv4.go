package ec2

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errorf(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "the request body exceeds %d bytes", maxBodyBytes)
		}
		return nil, errorf(http.StatusBadRequest, "InvalidHttpRequest", "reading the request body: %v", err)
	}
	return body, nil
}

// authHeader is the parsed Authorization header of a SigV4 request.
type authHeader struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func authFailure(format string, args ...any) *Error {
	return errorf(http.StatusUnauthorized, "AuthFailure", format, args...)
}

func parseAuthHeader(h string) (authHeader, error) {
	var a authHeader
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return a, authFailure("AWS was not able to validate the provided access credentials: the request is not signed with AWS4-HMAC-SHA256 (Authorization header missing or of another scheme)")
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return a, authFailure("the Credential %q is not <key>/<date>/<region>/<service>/aws4_request", v)
			}
			a.accessKey, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if a.accessKey == "" || len(a.signedHeaders) == 0 || a.signature == "" {
		return a, authFailure("the Authorization header lacks Credential, SignedHeaders or Signature")
	}
	return a, nil
}

// verify checks the request's Signature Version 4 against the configured credentials and
// returns the credential it was signed with. The signature is recomputed with the SDK's own
// signer over exactly the headers the client signed.
func (f *Front) verify(r *http.Request, body []byte, service string) (Credential, error) {
	a, err := parseAuthHeader(r.Header.Get("Authorization"))
	if err != nil {
		return Credential{}, err
	}
	cred, ok := f.creds[a.accessKey]
	if !ok {
		return Credential{}, authFailure("AWS was not able to validate the provided access credentials: unknown access key %s", a.accessKey)
	}
	if a.service != service {
		return Credential{}, authFailure("the credential is scoped to service %q, this endpoint is %q", a.service, service)
	}
	if a.region != f.net.region {
		return Credential{}, authFailure("the credential is scoped to region %q, this endpoint serves %q", a.region, f.net.region)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || !slices.Contains(a.signedHeaders, "x-amz-date") || at.Format("20060102") != a.date {
		return Credential{}, authFailure("X-Amz-Date is missing, unsigned or does not match the credential's date")
	}
	if d := f.opts.Now().Sub(at); d > f.opts.MaxClockSkew || d < -f.opts.MaxClockSkew {
		return Credential{}, authFailure("Signature expired: the request was signed at %s, more than %s from now", at.Format(time.RFC3339), f.opts.MaxClockSkew)
	}
	payload := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(payload[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return Credential{}, authFailure("X-Amz-Content-Sha256 does not match the body")
	}
	want, err := expectedSignature(r, a, cred, payloadHash, at)
	if err != nil {
		return Credential{}, err
	}
	if !hmac.Equal([]byte(want), []byte(a.signature)) {
		return Credential{}, authFailure("AWS was not able to validate the provided access credentials: the signature does not match (check the secret access key)")
	}
	return cred, nil
}

// expectedSignature signs a copy of r that has only the headers the client signed.
func expectedSignature(r *http.Request, a authHeader, cred Credential, payloadHash string, at time.Time) (string, error) {
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	c := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	for _, h := range a.signedHeaders {
		switch h {
		case "host", "x-amz-date":
		case "content-length":
			c.ContentLength = r.ContentLength
		default:
			vals := r.Header.Values(h)
			if len(vals) == 0 {
				return "", authFailure("signed header %q is not in the request", h)
			}
			c.Header[http.CanonicalHeaderKey(h)] = vals
		}
	}
	creds := aws.Credentials{AccessKeyID: cred.AccessKeyID, SecretAccessKey: cred.SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, c, payloadHash, a.service, a.region, at); err != nil {
		return "", authFailure("signing: %v", err)
	}
	got, err := parseAuthHeader(c.Header.Get("Authorization"))
	if err != nil {
		return "", err
	}
	if !slices.Equal(got.signedHeaders, a.signedHeaders) {
		return "", authFailure("SignedHeaders %s cannot be verified (expected %s)", strings.Join(a.signedHeaders, ";"), strings.Join(got.signedHeaders, ";"))
	}
	return got.signature, nil
}
