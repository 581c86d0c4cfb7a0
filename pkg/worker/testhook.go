package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/internal/workerhook"
)

// The in-process attempt pkg/workertest runs (internal/workerhook): the
// handler, its output and its verdict exactly as run does them, with the
// network's part (claims, beats, the upload, the report) left out.
func init() {
	workerhook.Declarations = func(wa any) []wire.Declaration {
		w := wa.(*Workers)
		out := make([]wire.Declaration, 0, len(w.types))
		for _, t := range w.types {
			out = append(out, t.decl)
		}
		return out
	}
	workerhook.Run = runInProcess
}

func runInProcess(ctx context.Context, wa any, asg *wire.Assignment) (workerhook.Outcome, error) {
	w, ok := wa.(*Workers)
	if !ok {
		return workerhook.Outcome{}, fmt.Errorf("worker: not workers: %T", wa)
	}
	var t *typeRunner
	for _, r := range w.types {
		if r.decl.Name == asg.Type {
			t = r
		}
	}
	if t == nil {
		return workerhook.Outcome{}, fmt.Errorf("worker: type %q not registered", asg.Type)
	}
	a := &attempt{w: w, t: t, asg: asg, kick: make(chan struct{}, 1),
		log: w.log.With("job_id", asg.ID, "type", asg.Type, "attempt", asg.Attempt)}
	actx, cancelAttempt := context.WithTimeoutCause(context.WithoutCancel(ctx), time.Duration(asg.TimeoutMS)*time.Millisecond, errAttemptTimeout)
	defer cancelAttempt()
	hctx, stopHandler := context.WithCancelCause(actx)
	defer stopHandler(nil)
	a.stopHandler = stopHandler
	// ctx ending is the claim lost (the owner canceled, the job ended
	// elsewhere): the handler's context ends with that cause.
	defer context.AfterFunc(ctx, a.lose)()

	// The output goes to memory instead of the result store, through the
	// same writer (its size limit, its count).
	var kept bytes.Buffer
	pr, pw := io.Pipe()
	rw := &resultWriter{pw: pw, h: sha256.New(), max: asg.MaxResultBytes, done: make(chan struct{})}
	go func() {
		defer close(rw.done)
		_, rw.err = io.Copy(&kept, pr)
	}()
	a.outOnce.Do(func() { a.out = rw })

	err := a.runHandler(hctx)
	if err == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
		err = context.Cause(actx) // as a real attempt: the budget is the type's rule
	}
	_ = pw.Close()
	<-rw.done
	a.mu.Lock()
	out := workerhook.Outcome{Progress: a.prog, Err: err}
	a.mu.Unlock()
	if kept.Len() > 0 {
		out.Output = kept.Bytes()
	}
	if a.isLost() {
		out.NoVerdict = "lost"
		return out, nil
	}
	if err == nil {
		return out, nil
	}
	verdict := a.classify(err, actx, hctx)
	var f *failure
	switch {
	case errors.Is(verdict, errLost):
		out.NoVerdict = "lost"
	case errors.As(verdict, &f):
		req := f.request(a.held())
		out.Fail = &req
	default: // shutdown, store outage: not a handler's doing here
		out.NoVerdict = "given_back"
	}
	return out, nil
}
