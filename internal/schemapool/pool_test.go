package schemapool

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/schema"
	"github.com/stretchr/testify/require"
)

func closed(n int) []byte {
	return fmt.Appendf(nil, `{"type":"object","additionalProperties":false,"properties":{"p%d":{"type":"integer"}}}`, n)
}

// The same schema, however it is spelled, is compiled once while its
// compiled form is held; a refused one is not compiled again either.
func TestASchemaIsCompiledOncePerKey(t *testing.T) {
	t.Parallel()
	p := New(1)
	ctx := context.Background()
	a, err := p.Compile(ctx, []byte(`{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer"}}}`))
	require.NoError(t, err)
	b, err := p.Compile(ctx, []byte(`{ "properties": {"n": {"type": "integer"}}, "additionalProperties": false, "type": "object" }`))
	require.NoError(t, err)
	require.Same(t, a, b, "member order and white space make no other schema")
	require.EqualValues(t, 1, p.Compiles())

	_, err = p.Compile(ctx, []byte(`{"type":"object","properties":{"s":{"type":"string"}}}`))
	require.Error(t, err, "unbounded")
	_, again := p.Compile(ctx, []byte(`{"type":"object","properties":{"s":{"type":"string"}}}`))
	require.Equal(t, err, again)
	require.EqualValues(t, 2, p.Compiles(), "a refusal is remembered")
}

// held is a compiler whose compiles wait for release, counting how many
// run at once.
type held struct {
	release       chan struct{}
	running, most atomic.Int32
	started       chan struct{}
}

func newHeld() *held { return &held{release: make(chan struct{}), started: make(chan struct{}, 100)} }

func (h *held) compile(raw []byte) (*schema.Schema, error) {
	n := h.running.Add(1)
	for {
		m := h.most.Load()
		if n <= m || h.most.CompareAndSwap(m, n) {
			break
		}
	}
	h.started <- struct{}{}
	<-h.release
	h.running.Add(-1)
	return schema.Compile(raw)
}

// Forty different schemas at once are compiled one at a time; a caller
// that cannot wait as long is told the pool is busy; callers of a schema
// under way wait for its compile instead of compiling it again.
func TestThePoolBoundsTheCompilesAtOnce(t *testing.T) {
	t.Parallel()
	h := newHeld()
	p := NewWith(1, h.compile)
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for i := range 40 {
		for range 2 { // each schema twice
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := p.Compile(context.Background(), closed(i))
				errs <- err
			}()
		}
	}
	<-h.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Compile(ctx, closed(1000))
	require.ErrorIs(t, err, ErrBusy)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	close(h.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, h.most.Load(), "one compile at a time")
	require.EqualValues(t, 40, p.Compiles(), "each schema once")
	_, err = p.Compile(context.Background(), closed(1000))
	require.NoError(t, err, "a wait given up is not remembered as the schema's fate")
}
