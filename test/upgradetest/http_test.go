package upgradetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
)

var client = &http.Client{Timeout: 10 * time.Second}

// body is job i's request: the first two render 2,000 pages, long enough
// to be running when their process is stopped.
func body(i int) string {
	pages := 2
	if i < 2 {
		pages = 2000
	}
	return fmt.Sprintf(`{"type":"permit_report","params":{"case_id":%d,"revision":1,"pages":%d}}`, i+1, pages)
}

// submit posts job i under key; it returns the status and the job's id.
func submit(t *testing.T, addr, token, key string, i int) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/jobs", strings.NewReader(body(i)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("submit %s: %v", key, err)
	}
	defer resp.Body.Close()
	var j struct {
		ID string `json:"id"`
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &j)
	if resp.StatusCode >= 300 {
		t.Fatalf("submit %s: %d %s", key, resp.StatusCode, b)
	}
	return resp.StatusCode, j.ID
}

// getJSON reads a resource.
func getJSON(addr, token, path string, v any) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

// waitState polls a job until it is in state, failing on a terminal other.
func waitState(t *testing.T, addr, token, id, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var j struct {
			State string `json:"state"`
		}
		_, err := getJSON(addr, token, "/v1/jobs/"+id, &j)
		if err == nil && j.State == state {
			return
		}
		if err == nil && state == "succeeded" && (j.State == "failed" || j.State == "canceled") {
			t.Fatalf("job %s %s", id, j.State)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not %s within %s (%q, %v)", id, state, timeout, j.State, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReady polls /readyz (or an ops address's) until it answers 200.
func waitReady(t *testing.T, p *proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited: %v\n%s", p.name, p.err, p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 60 s: %v\n%s", p.name, err, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listIDs is every job of the token's requester, through the list's pages.
func listIDs(t *testing.T, addr, token string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		var page struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
			NextCursor string `json:"next_cursor"`
		}
		code, err := getJSON(addr, token, "/v1/jobs?limit=100&cursor="+cursor, &page)
		if err != nil || code != http.StatusOK {
			t.Fatalf("list: %d %v", code, err)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		cursor = page.NextCursor
	}
	t.Fatal("the job list does not end")
	return nil
}

// token mints a requester's token with bin (the old binary: a token of
// the previous release must still be accepted).
func token(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"token", "--tenant", "4", "--subject", "upgrader"}, args...)...)
	cmd.Env = jobtest.ChildEnv(env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	return strings.TrimSpace(string(out))
}
