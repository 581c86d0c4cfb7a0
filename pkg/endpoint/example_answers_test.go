package endpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/jobgate/jobgate/pkg/endpoint"
)

// The four answers a handler gives, as jobgate reads them: a result
// succeeds the job with it; no result succeeds it without one; a refusal
// fails it for good with a problem document whose detail the job's owner
// reads; "retry later" fails this attempt only, and jobgate tries again
// after the type's backoff and not before Retry-After.
func ExampleAnswer() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	v, err := endpoint.NewVerifier(secret)
	if err != nil {
		panic(err)
	}
	h := endpoint.Handler(v, func(ctx context.Context, a *endpoint.Attempt) endpoint.Answer {
		var p struct {
			Size int `json:"size"`
		}
		if err := json.Unmarshal(a.Params, &p); err != nil {
			return endpoint.Reject("params do not fit: " + err.Error())
		}
		switch {
		case p.Size > 1000:
			return endpoint.Reject(fmt.Sprintf("size %d is over 1000", p.Size))
		case p.Size == 0:
			return endpoint.NoResult()
		case a.Attempt == 1 && p.Size == 13:
			return endpoint.RetryLater(30 * time.Second) // e.g. a dependency is down
		}
		return endpoint.Result([]byte(fmt.Sprintf("%d thumbnails", p.Size)))
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, params := range []string{`{"size":4}`, `{"size":0}`, `{"size":5000}`, `{"size":13}`} {
		req, err := endpoint.NewTestRequest(secret, srv.URL, endpoint.Attempt{
			ID: "job_example", Type: "thumbnails", Attempt: 1, Attempts: 3,
			Params: json.RawMessage(params), Deadline: time.Now().Add(time.Minute),
		}, time.Now())
		if err != nil {
			panic(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusUnprocessableEntity:
			var problem struct {
				Detail string `json:"detail"`
			}
			_ = json.Unmarshal(body, &problem)
			fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), problem.Detail)
		case http.StatusServiceUnavailable:
			fmt.Println(resp.StatusCode, "Retry-After:", resp.Header.Get("Retry-After"))
		case http.StatusNoContent:
			fmt.Println(resp.StatusCode, "no result")
		default:
			fmt.Println(resp.StatusCode, string(body))
		}
	}
	// Output:
	// 200 4 thumbnails
	// 204 no result
	// 422 application/problem+json size 5000 is over 1000
	// 503 Retry-After: 30
}
