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

// A handler of an endpoint type: jobgate POSTs each attempt, signed with
// the type's secret (PUT /v1/admin/types/{name} answered it once); the
// handler answers the result, or refuses the job, or asks to be retried.
func Example() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // os.Getenv("JOBGATE_ENDPOINT_SECRET")
	v, err := endpoint.NewVerifier(secret)
	if err != nil {
		panic(err)
	}
	h := endpoint.Handler(v, func(ctx context.Context, a *endpoint.Attempt) endpoint.Answer {
		var p struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(a.Params, &p); err != nil || p.Name == "" {
			return endpoint.Reject("name is required")
		}
		return endpoint.Result([]byte("Hello, " + p.Name + "!"))
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	// What jobgate sends (a handler's own tests build it the same way).
	req, _ := endpoint.NewTestRequest(secret, srv.URL, endpoint.Attempt{
		ID: "job_example", Type: "greeting", Attempt: 1, Attempts: 3,
		Params: json.RawMessage(`{"name":"Ada"}`), Deadline: time.Now().Add(time.Minute),
	}, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	// Anyone else's request is refused.
	forged, _ := endpoint.NewTestRequest("whsec_"+"c29tZW9uZSBlbHNl", srv.URL, endpoint.Attempt{ID: "job_x", Attempt: 1}, time.Now())
	resp, err = http.DefaultClient.Do(forged)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 200 Hello, Ada!
	// 401
}
