// The generic list/get/create/update/delete handlers every kindAPI shares,
// and the helpers that turn a model call into a view response with its ETag.

package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// idsByName returns the keys of m ordered by the objects' names.
func idsByName[T any](m map[string]T, name func(T) string) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := name(m[out[i]]), name(m[out[j]])
		return a < b || (a == b && out[i] < out[j])
	})
	return out
}

// createWith decodes the request into Spec and runs create. When create
// finds the name taken, same (if given) looks for an existing object equal
// to the spec: then the request is a repeat and answers that object.
func createWith[Spec, T any](c *call, create func(Spec) (T, error), id func(T) string, same func(*world, Spec) string) (string, bool, error) {
	var spec Spec
	if err := c.decode(&spec); err != nil {
		return "", false, err
	}
	v, err := create(spec)
	if err != nil {
		if errors.Is(err, model.ErrExists) && same != nil {
			if w, werr := c.world(); werr == nil {
				if got := same(w, spec); got != "" {
					return got, false, nil
				}
			}
		}
		return "", false, err
	}
	return id(v), true, nil
}

// updateWith decodes the request into Update and runs update.
func updateWith[Update, T any](c *call, update func(Update) (T, error), id func(T) string) (string, error) {
	var up Update
	if err := c.decode(&up); err != nil {
		return "", err
	}
	v, err := update(up)
	if err != nil {
		return "", err
	}
	return id(v), nil
}

func (k kindAPI) listHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		q := c.r.URL.Query()
		known := map[string]filter{}
		for _, f := range k.filters {
			known[f.param] = f
		}
		for p := range q {
			if _, ok := known[p]; !ok {
				names := make([]string, 0, len(known))
				for n := range known {
					names = append(names, n)
				}
				sort.Strings(names)
				return 0, nil, model.WithField(errorf(http.StatusBadRequest, "unknown filter %q on %s; it accepts: %s", p, c.r.URL.Path, strings.Join(names, ", ")), queryField(p))
			}
		}
		for p := range q {
			if f := known[p]; f.ref != "" {
				if _, err := s.store.Resolve(c.ctx, f.ref, q.Get(p)); err != nil {
					return 0, nil, model.WithField(err, p)
				}
			}
		}
		w, err := c.world()
		if err != nil {
			return 0, nil, err
		}
		out := []any{}
	next:
		for _, id := range k.ids(w) {
			for p := range q {
				if !slices.Contains(known[p].values(w, id), q.Get(p)) {
					continue next
				}
			}
			v, _ := k.view(w, id)
			out = append(out, v)
		}
		return http.StatusOK, out, nil
	}
}

func (k kindAPI) getHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		id, err := s.store.Resolve(c.ctx, k.kind, c.ref())
		if err != nil {
			return 0, nil, model.WithField(err, "ref")
		}
		return s.viewResponse(c, k, id, http.StatusOK)
	}
}

func (k kindAPI) createHandler(s *Server) func(*call) (int, any, error) {
	if k.createJob != nil {
		return k.createJob
	}
	return func(c *call) (int, any, error) {
		id, created, err := k.create(c)
		if err != nil {
			return 0, nil, err
		}
		if !created {
			return s.viewResponse(c, k, id, http.StatusOK)
		}
		c.w.Header().Set("Location", APIPrefix+k.path+"/"+id)
		return s.viewResponse(c, k, id, http.StatusCreated)
	}
}

func (k kindAPI) updateHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		id, err := k.update(c)
		if err != nil {
			return 0, nil, err
		}
		return s.viewResponse(c, k, id, http.StatusOK)
	}
}

func (k kindAPI) deleteHandler(s *Server) func(*call) (int, any, error) {
	return func(c *call) (int, any, error) {
		if id, err := s.store.Resolve(c.ctx, k.kind, c.ref()); err == nil {
			c.object = &objectRef{Kind: k.kind, ID: id, Name: c.ref()}
		}
		if err := k.del(c.ctx, c.ref()); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, nil
	}
}

// viewResponse answers the view of one object with its ETag.
func (s *Server) viewResponse(c *call, k kindAPI, id string, status int) (int, any, error) {
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	v, ok := k.view(w, id)
	if !ok {
		return 0, nil, fmt.Errorf("%s %s vanished while reading it; retry: %w", k.kind, id, model.ErrConflict)
	}
	if rev := w.revs[k.kind+"/"+id]; rev > 0 {
		c.w.Header().Set("ETag", fmt.Sprintf("%q", strconv.FormatInt(rev, 10)))
	}
	c.object = &objectRef{Kind: k.kind, ID: id, Name: w.nameOf(k.kind, id)}
	return status, v, nil
}

func (c *call) world() (*world, error) { return c.srv.loadWorld(c.ctx) }

func (s *Server) kindOf(kind string) kindAPI {
	for _, k := range s.kinds() {
		if k.kind == kind {
			return k
		}
	}
	panic("gateway: unknown kind " + kind)
}

// queryField is the field an error about query parameter p names: p, or
// "query" for a parameter without a name ("?=x").
func queryField(p string) string {
	if p == "" {
		return "query"
	}
	return p
}
